"""The compiled kernels' disk cache (:mod:`dcsim.allocators.kernel_cache`, issue #34 item
2): numba reads its cache with pickle, so dcsim reads only a private folder of the user's,
never numba's ``__pycache__`` nor ``NUMBA_CACHE_DIR``; refuses a folder others could write;
and compiles again, with one warning, when a cached kernel cannot be loaded.

Each case runs ``dcsim run`` (first_fit, whose scan is a kernel) in a child process with
its own HOME and XDG_CACHE_HOME, so the cache folder is the test's."""

from __future__ import annotations

import io
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("numba")

from numba.core.caching import _CacheLocator  # noqa: E402

import dcsim  # noqa: E402
from dcsim.allocators import single_kernel  # noqa: E402
from dcsim.allocators.kernel_cache import ENV, default_folder, make_private, problem  # noqa: E402

PACKAGE = Path(dcsim.__file__).resolve().parent

EXPERIMENT = """\
name: kc
seed: 3
topology: {kind: flat, servers: 6, server: {cpu: 16, mem: 64}}
workload:
  requests: 300
  arrival: {process: poisson, rate: 4}
  demand:
    cpu: {dist: discrete, values: [1, 2, 4, 8], probs: [0.4, 0.3, 0.2, 0.1]}
    mem: {dist: uniform_int, low: 1, high: 16}
  duration: {dist: exponential, mean: 6}
allocators: [first_fit]
"""


class Payload:
    """Unpickled, it creates the file ``marker`` (code run by loading the cache)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def plant(folder: Path, marker: Path) -> Path:
    """A poisoned index of first_fit's kernel in ``folder``, named as numba names it."""
    f = single_kernel.first_fit_two.py_func
    v = sys.version_info
    base = (f"single_kernel.{f.__qualname__}-{f.__code__.co_firstlineno}"
            f".py{v.major}{v.minor}{sys.abiflags}")
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / f"{base}.nbi"
    index.write_bytes(pickle.dumps(Payload(marker)))
    return index


def subfolder(source_file: Path) -> str:
    """The folder numba (and dcsim, inside its own) names after a source file's folder."""
    return _CacheLocator.get_suitable_cache_subpath(str(source_file))


def child_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The child's environment: its own cache settings; an ``extra`` PYTHONPATH goes before
    the inherited one (which may be where the dependencies are, as on a machine whose
    packages travel as a folder of wheels)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", ENV, "XDG_CACHE_HOME")}
    (tmp / "home").mkdir(exist_ok=True)
    env.update(HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "xdg"), DCSIM_KERNELS="numba",
               PYTHONWARNINGS="default")
    path = os.pathsep.join(p for p in (extra.pop("PYTHONPATH", ""), env.get("PYTHONPATH", ""))
                           if p)
    env.update(extra)
    if path:
        env["PYTHONPATH"] = path
    return env


def dcsim_run(tmp: Path, env: dict[str, str], out: str = "out") -> subprocess.CompletedProcess:
    exp = tmp / "kc.yaml"
    exp.write_text(EXPERIMENT)
    return subprocess.run([sys.executable, "-m", "dcsim", "run", str(exp), "--out",
                           str(tmp / out), "--jobs", "1", "--overwrite"],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=300)


def requests(tmp: Path, out: str) -> pd.DataFrame:
    df = pd.read_parquet(tmp / out / "requests")
    return df.drop(columns=["decision_s"]).sort_values("id").reset_index(drop=True)


def folder_of(env: dict[str, str]) -> Path:
    """The child's default cache folder (its XDG_CACHE_HOME)."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]
    try:
        return default_folder()
    finally:
        if old is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = old


def warnings_in(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "KernelCacheWarning" in ln]


# ------------------------------------------------------------------------------ numba's places
def test_a_pickle_planted_where_numba_would_read_it_is_never_loaded(tmp_path):
    # a copy of the package, so that its __pycache__ is the test's to poison
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "dcsim", ignore=shutil.ignore_patterns("__pycache__"))
    kernel_file = src / "dcsim" / "allocators" / "single_kernel.py"
    shared = tmp_path / "shared"  # a NUMBA_CACHE_DIR others write to
    in_tree = tmp_path / "in_tree.marker"
    in_shared = tmp_path / "shared.marker"
    plant(kernel_file.parent / "__pycache__", in_tree)  # numba's default
    plant(shared / subfolder(kernel_file), in_shared)  # numba's NUMBA_CACHE_DIR
    env = child_env(tmp_path, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(shared))

    done = dcsim_run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert not in_tree.exists() and not in_shared.exists()
    # the child ran the copy, and cached its kernel in the private folder
    cached = folder_of(env) / subfolder(kernel_file)
    assert list(cached.glob("single_kernel.first_fit_two-*.nbi")), done.stderr
    assert not warnings_in(done.stderr), done.stderr

    # control: numba's own cache=True on the same function does run both payloads
    stock = ("import numpy as np; from numba import njit; "
             "import dcsim.allocators.single_kernel as m; "
             f"assert m.__file__.startswith({str(src)!r}), m.__file__; "
             "f = njit(cache=True)(m.first_fit_two.py_func); "
             "f(np.ones(2), np.ones(2), 0.0, 0.0)")
    without_shared = {k: v for k, v in env.items() if k != "NUMBA_CACHE_DIR"}
    for marker, e in ((in_shared, env), (in_tree, without_shared)):
        subprocess.run([sys.executable, "-c", stock], env=e, cwd=tmp_path, check=True,
                       capture_output=True, timeout=300)
        assert marker.exists()


# ------------------------------------------------------------------------------ refused folders
def _loose_root(root: Path) -> None:
    root.mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o775)  # group-writable


def _foreign_root(root: Path) -> None:
    root.mkdir(parents=True, mode=0o700)
    os.chown(root, 65534, 65534)


def _loose_parent(root: Path) -> None:
    root.mkdir(parents=True, mode=0o700)
    os.chmod(root.parent, 0o777)  # world-writable, no sticky bit


@pytest.mark.parametrize("spoil, says", [
    (_loose_root, "is writable by group or others (mode 0o775"),
    pytest.param(_foreign_root, "belongs to uid 65534, not to you", marks=[pytest.mark.skipif(
        os.geteuid() != 0, reason="making a folder another user's needs root"),
        pytest.mark.slow]),
    pytest.param(_loose_parent,
                 "is writable by group or others (mode 0o777; someone else could replace",
                 marks=pytest.mark.slow),
], ids=["group-writable", "not-owned", "parent-world-writable"])
def test_a_cache_folder_others_could_write_is_refused_with_one_warning(tmp_path, spoil, says):
    env = child_env(tmp_path)
    root = folder_of(env)
    spoil(root)
    marker = tmp_path / "payload.marker"
    plant(root / subfolder(PACKAGE / "allocators" / "single_kernel.py"), marker)

    done = dcsim_run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    warned = warnings_in(done.stderr)
    assert len(warned) == 1, done.stderr
    assert f"not using the compiled-kernel cache {root}" in warned[0] and says in warned[0]
    assert "compiled for this process only" in warned[0] and ENV in warned[0]


def test_the_folder_is_made_private_and_checked(tmp_path):
    folder = tmp_path / "a" / "b" / "c"
    assert make_private(folder) is None
    for p in (folder, folder.parent, folder.parent.parent):
        assert p.stat().st_mode & 0o777 == 0o700
    os.chmod(folder, 0o720)
    assert "writable by group or others" in problem(folder)
    os.chmod(folder, 0o700)
    (tmp_path / "file").write_text("")
    assert problem(tmp_path / "file") == "it is not a folder"
    os.chmod(tmp_path / "a", 0o707)
    assert f"its parent {tmp_path / 'a'} is writable" in problem(folder)
    os.chmod(tmp_path / "a", 0o1777)  # sticky, like /tmp: others cannot replace it
    assert problem(folder) is None


def test_the_cache_can_be_turned_off(tmp_path):
    env = child_env(tmp_path, **{ENV: "off"})
    done = dcsim_run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "xdg").exists() and not warnings_in(done.stderr)


# ------------------------------------------------------------------------------ corrupt files
@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A cache folder holding first_fit's kernel, and the numpy path's rows."""
    tmp = tmp_path_factory.mktemp("populated")
    env = child_env(tmp)
    done = dcsim_run(tmp, env)
    assert done.returncode == 0, done.stderr
    numpy = dcsim_run(tmp, {**env, "DCSIM_KERNELS": "numpy"}, out="numpy")
    assert numpy.returncode == 0, numpy.stderr
    return tmp, requests(tmp, "numpy")


def _random(p: Path) -> None:
    """Random bytes that numba cannot read. About one random string in 5,000 unpickles into
    some object, which numba takes for another version's index and silently replaces (a
    cache miss, no warning, the same rows): the case the test is not about, and it failed
    the test once in sixteen fresh runs. So the bytes are seeded, and checked to fail."""
    n = max(p.stat().st_size, 64)
    rng = random.Random(n)
    while True:
        data = rng.randbytes(n)
        try:
            pickle.load(io.BytesIO(data))
        except Exception:  # noqa: BLE001 - any failure to read is what is wanted
            break
    p.write_bytes(data)


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _truncated(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def test_an_error_message_of_two_lines_makes_a_one_line_warning(tmp_path, monkeypatch):
    """Random bytes in a cached index sometimes raise an UnpicklingError whose message spans
    two lines (the corrupt-kernel test below failed on one such run); the warning, which
    a user reads as one line of stderr, keeps it on one."""
    from dcsim.allocators import kernel_cache as kc

    for name, empty in (("_warned", set()), ("_discarded", set()), ("_folders", {})):
        monkeypatch.setattr(kc, name, empty)
    folder = tmp_path / "allocators_x"
    folder.mkdir()
    error = pickle.UnpicklingError("A load persistent id instruction was encountered,\n"
                                   "but no persistent_load function was specified.")
    with pytest.warns(kc.KernelCacheWarning) as got:
        kc.discard(folder, error, "first_fit_two")
    (w,) = got
    assert "\n" not in str(w.message)
    assert "(UnpicklingError: A load persistent id instruction was encountered, but no" \
        in str(w.message)
    assert not folder.exists()


# one case in the default suite (each compiles the kernels in a child process), the rest slow
@pytest.mark.parametrize("suffix", ["nbi", pytest.param("nbc", marks=pytest.mark.slow)])
@pytest.mark.parametrize("spoil", [_random, pytest.param(_empty, marks=pytest.mark.slow),
                                   pytest.param(_truncated, marks=pytest.mark.slow)],
                         ids=["random", "empty", "truncated"])
def test_a_corrupt_cached_kernel_is_compiled_again_with_one_warning(populated, tmp_path,
                                                                    suffix, spoil):
    base, numpy_rows = populated
    shutil.copytree(base / "xdg", tmp_path / "xdg", symlinks=True)
    env = child_env(tmp_path)
    folder = folder_of(env) / subfolder(PACKAGE / "allocators" / "single_kernel.py")
    files = sorted(folder.glob(f"single_kernel.first_fit_two-*.{suffix}"))
    assert files
    for f in files:
        spoil(f)

    done = dcsim_run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    warned = warnings_in(done.stderr)
    assert len(warned) == 1, done.stderr
    assert f"from the cache {folder} (" in warned[0]
    assert f"compiled again into the fresh folder {folder}" in warned[0]
    pd.testing.assert_frame_equal(requests(tmp_path, "out"), numpy_rows)
    if spoil is _random and suffix == "nbi":  # the fresh folder serves the next run quietly
        again = dcsim_run(tmp_path, env, out="again")
        assert again.returncode == 0 and not warnings_in(again.stderr), again.stderr
        assert not list(folder.parent.glob("*.unreadable-*"))
