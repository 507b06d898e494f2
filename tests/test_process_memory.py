"""The ``dcsim`` program's allocator settings (``dcsim.process_memory``, issue #47 item 9):
set by the program, before Arrow starts, for it and the workers it starts; a user's own
settings kept; nothing changed by ``import dcsim`` or by calling the commands from Python;
the same rows either way."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import yaml

from dcsim import process_memory as pm
from tests.helpers.cli import assert_same_dataset
from tests.helpers.configs import small_experiment


def test_tune_sets_both_and_keeps_what_the_user_set(monkeypatch):
    calls = []
    monkeypatch.setattr(pm, "_mallopt", lambda p, v: (calls.append((p, v)), True)[1])
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    env: dict[str, str] = {}
    assert pm.tune(env) == env == {"ARROW_DEFAULT_MEMORY_POOL": "system",
                                   "MALLOC_MMAP_THRESHOLD_": str(256 * 1024)}
    assert calls == [(pm.M_MMAP_THRESHOLD, 256 * 1024)]
    calls.clear()
    mine = {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc", "MALLOC_MMAP_THRESHOLD_": "1048576"}
    assert pm.tune(dict(mine)) == {}
    assert calls == []            # glibc already read the user's value at start


def test_no_arrow_pool_once_pyarrow_is_loaded_and_no_variable_without_mallopt(monkeypatch):
    import pyarrow  # noqa: F401  (loaded: its pool is chosen, the variable would lie)

    monkeypatch.setattr(pm, "_mallopt", lambda p, v: False)   # not glibc
    env: dict[str, str] = {}
    assert pm.tune(env) == {} and env == {}


def clean_env(**env) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("ARROW_DEFAULT_MEMORY_POOL", "MALLOC_MMAP_THRESHOLD_")}
    full.update(env)
    return full


def run_py(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=clean_env()).stdout.strip()


def test_the_program_sets_them_before_arrow_starts_and_import_dcsim_does_not():
    # the program's module loads no pyarrow before tune() runs
    assert run_py("import sys, dcsim.cli; print('pyarrow' in sys.modules)") == "False"
    # importing dcsim, its commands and pyarrow changes nothing
    assert run_py("import os, dcsim, dcsim.cli, pyarrow;"
                  "print(sorted(k for k in os.environ if k in ('ARROW_DEFAULT_MEMORY_POOL',"
                  " 'MALLOC_MMAP_THRESHOLD_')))") == "[]"
    # the program (here with its commands replaced by nothing) sets both, for its workers too
    show = ("import os, pyarrow as pa;"
            "print(pa.default_memory_pool().backend_name, os.environ['MALLOC_MMAP_THRESHOLD_'])")
    want = f"system {256 * 1024}"
    assert run_py("import dcsim.cli as c; c.main = lambda: None; c.program();" + show) == want
    assert run_py("import runpy, dcsim.cli as c; c.main = lambda: None;"
                  "runpy.run_module('dcsim', run_name='__main__');" + show) == want
    # the installed program is that entry
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "dcsim"]
    assert ep.value == "dcsim.cli:program"


def test_the_same_rows_with_and_without_the_settings(tmp_path):
    cfg = small_experiment("mem", seed=4, requests=1500, allocators=["first_fit", "random"])
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(cfg, sort_keys=False))
    for out, env in (("tuned", {}),
                     ("libraries", {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc",
                                    "MALLOC_MMAP_THRESHOLD_": str(32 << 20)})):
        subprocess.run([sys.executable, "-m", "dcsim", "run", str(exp), "--out",
                        str(tmp_path / out)], check=True, env=clean_env(**env),
                       capture_output=True)
    assert_same_dataset(tmp_path / "tuned", tmp_path / "libraries", runs=2)
