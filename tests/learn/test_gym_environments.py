"""dcsim's Gymnasium environments as a standard RL library sees them (issue #36): registered
by id, the two-step VMR²L variant with plain masks, and the base classes that run a policy
trained on them as an allocator or a rescheduler."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from dcsim.environments import ENVIRONMENTS, register_envs  # noqa: E402
from dcsim.errors import PluginError  # noqa: E402
from dcsim.learn.nara.env import NaraEnv  # noqa: E402
from dcsim.learn.nara.env_policy import NaraEnvPolicy  # noqa: E402
from dcsim.learn.vmr2l.env import VMR2LEnv, VMR2LTwoStepEnv  # noqa: E402
from dcsim.learn.vmr2l.env_policy import VMR2LTwoStepPolicy  # noqa: E402
from dcsim.modes.loss import Engine, EngineConfig  # noqa: E402
from dcsim.vm.mapping_io import parse_mapping  # noqa: E402
from dcsim.vm.synthetic import synthetic_preset  # noqa: E402


def fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


# ------------------------------------------------------------------------- registration
def test_import_dcsim_registers_every_environment_in_a_fresh_interpreter():
    code = ("import gymnasium as gym, dcsim\n"
            "for i in ['dcsim/Nara-v0', 'dcsim/VMR2L-v0', 'dcsim/VMR2L-TwoStep-v0']:\n"
            "    print(type(gym.make(i).unwrapped).__name__)\n")
    r = fresh(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["NaraEnv", "VMR2LEnv", "VMR2LTwoStepEnv"]


def test_import_dcsim_does_not_import_gymnasium_but_registers_when_it_is_imported():
    r = fresh("import sys, dcsim\n"
              "print('gymnasium' in sys.modules)\n"
              "import gymnasium as gym\n"
              "print(type(gym.make('dcsim/VMR2L-TwoStep-v0').unwrapped).__name__)\n"
              "print(sum(type(f).__name__ == 'AfterGymnasiumLoads' for f in sys.meta_path))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "VMR2LTwoStepEnv", "0"]


ROOT = Path(__file__).parents[2]
START_UP = "dcsim-gymnasium.pth"


def _installed_start_up_file() -> Path | None:
    try:
        path = Path(distribution("dcsim").locate_file(START_UP))
    except PackageNotFoundError:
        return None
    return path if path.exists() else None


@pytest.mark.skipif(_installed_start_up_file() is None,
                    reason="dcsim is not pip-installed here (a checkout on PYTHONPATH)")
def test_an_installed_dcsim_registers_them_when_gymnasium_is_imported():
    """The issue's check, word for word: no ``import dcsim``. The start-up file's hook
    imports nothing of dcsim before ``gymnasium`` is imported."""
    r = fresh("import sys\n"
              "print('dcsim' in sys.modules)\n"
              "import gymnasium as gym; gym.make('dcsim/Nara-v0'); gym.make('dcsim/VMR2L-v0')\n"
              "print(sum(type(f).__name__ == 'AfterGymnasiumLoads' for f in sys.meta_path))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "0"]
    assert _installed_start_up_file().read_text() == (ROOT / START_UP).read_text()


def test_the_hook_is_installed_once_and_registers_at_the_gymnasium_import():
    r = fresh("import sys, _dcsim_gymnasium as h\n"
              "h.install(); h.install()\n"
              "count = lambda: sum(isinstance(f, h.AfterGymnasiumLoads) for f in sys.meta_path)\n"
              "print(count(), 'dcsim' in sys.modules)\n"
              "import gymnasium as gym\n"
              "print(count(), 'dcsim/VMR2L-TwoStep-v0' in gym.registry)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "False", "0", "True"]


def test_the_start_up_file_never_breaks_the_interpreter(tmp_path):
    """Its one line, run where ``_dcsim_gymnasium`` cannot be imported (dcsim removed but
    the file left behind), is silent."""
    line = (ROOT / START_UP).read_text()
    assert line.startswith("import ") and line.count("\n") == 1  # site.py runs such lines
    r = subprocess.run([sys.executable, "-S", "-c", line + "print('started')"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin"})
    assert (r.returncode, r.stdout, r.stderr) == (0, "started\n", "")


def _site_with(tmp_path: Path, module_text: str | None = None) -> Path:
    """A site directory holding the start-up file and ``_dcsim_gymnasium.py`` (the real
    one, or ``module_text``), as a removed dcsim leaves them behind."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    shutil.copy(ROOT / START_UP, site_dir / START_UP)
    (site_dir / "_dcsim_gymnasium.py").write_text(
        module_text if module_text is not None else (ROOT / "_dcsim_gymnasium.py").read_text())
    return site_dir


def test_a_removed_dcsim_never_breaks_import_gymnasium(tmp_path):
    """#47 item 6: dcsim gone, its start-up file and hook left: ``import gymnasium`` in any
    program still works, with a warning saying what to remove."""
    site_dir = _site_with(tmp_path)
    r = fresh("import sys\nsys.modules['dcsim'] = None  # uninstalled\n"
              f"import site; site.addsitedir({str(site_dir)!r})\n"
              "import gymnasium\nprint('imported', gymnasium.__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["imported", "gymnasium"]
    assert "RuntimeWarning: dcsim's Gymnasium environments are not registered" in r.stderr
    assert "dcsim-gymnasium.pth" in r.stderr and "Traceback" not in r.stderr


def test_in_a_second_environment_without_dcsim_gymnasium_still_imports(tmp_path):
    """#47 item 6, in a second virtual environment: gymnasium and its dependencies linked
    into a fresh venv, dcsim not, and the start-up file and hook left in its site-packages
    as a removed dcsim leaves them. Every interpreter of that environment starts, and
    ``import gymnasium`` works, with the warning."""
    import importlib.util
    import venv

    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    site_dir = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig."
                                    "get_paths()['purelib'])"], capture_output=True,
                                   text=True, check=True).stdout.strip())
    for name in ("gymnasium", "numpy", "cloudpickle", "typing_extensions",
                 "farama_notifications"):
        spec = importlib.util.find_spec(name)
        src = Path(spec.origin)
        src = src.parent if spec.submodule_search_locations else src
        (site_dir / src.name).symlink_to(src)
        if name == "numpy":   # numpy's compiled libraries sit beside it in some wheels
            for extra in src.parent.glob("numpy.libs"):
                (site_dir / extra.name).symlink_to(extra)
    shutil.copy(ROOT / START_UP, site_dir / START_UP)
    shutil.copy(ROOT / "_dcsim_gymnasium.py", site_dir / "_dcsim_gymnasium.py")
    clean = {"PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec("
                        "'dcsim') is None)"], capture_output=True, text=True, env=clean,
                       cwd=tmp_path, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "True"), r.stderr   # dcsim is not there
    r = subprocess.run([str(py), "-c", "import gymnasium; print('imported')"],
                       capture_output=True, text=True, env=clean, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "imported", r.stderr
    assert "dcsim's Gymnasium environments are not registered" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("failure", ["raise SystemExit(3)", "raise KeyboardInterrupt",
                                     "raise RuntimeError('broken')"])
def test_a_start_up_failure_never_stops_the_interpreter(tmp_path, failure):
    site_dir = _site_with(tmp_path, failure + "\n")
    r = fresh(f"import site; site.addsitedir({str(site_dir)!r})\nprint('alive')")
    assert (r.returncode, r.stdout, r.stderr) == (0, "alive\n", "")


@pytest.mark.slow  # builds an sdist of a copy of the repository (a few seconds)
def test_a_source_distribution_carries_the_start_up_file(tmp_path):
    """``pip install dcsim-*.tar.gz`` runs setup.py, which copies the file: the sdist must
    hold it (MANIFEST.in), or that install fails."""
    import tarfile

    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", "results", "*.egg-info", "__pycache__", ".hypothesis", "build", "dist"))
    r = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta;"
                        " print(build_meta.build_sdist(sys.argv[1]))", str(tmp_path)],
                       cwd=tree, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tmp_path / r.stdout.split()[-1]) as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {START_UP, "_dcsim_gymnasium.py", "setup.py"} <= names


def test_the_module_id_form_works_without_an_import():
    r = fresh("import gymnasium as gym\n"
              "print(type(gym.make('dcsim:dcsim/VMR2L-TwoStep-v0').unwrapped).__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "VMR2LTwoStepEnv"


def test_registering_imports_neither_the_environments_nor_torch():
    r = fresh("import sys, dcsim\n"
              "print(sorted(m for m in sys.modules if m.startswith(('torch', "
              "'dcsim.learn'))))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_dcsim_command_does_not_register_or_import_gymnasium():
    r = fresh("import sys\nsys.argv = ['dcsim']\nimport dcsim\n"
              "print('gymnasium' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_the_gymnasium_entry_point_names_the_registering_function():
    """Gymnasium before 1.0 loads the ``gymnasium.envs`` group at import and calls each
    entry point inside its name's namespace; this is what it would call."""
    (ep,) = [e for e in entry_points(group="gymnasium.envs") if e.name == "dcsim"]
    assert ep.load() is register_envs
    for env_id in ENVIRONMENTS:
        gym.registry.pop(env_id, None)
    with gym.envs.registration.namespace("dcsim"):
        ep.load()()
    assert set(ENVIRONMENTS) <= set(gym.registry)
    register_envs()   # idempotent
    for env_id, entry in ENVIRONMENTS.items():
        assert gym.spec(env_id).entry_point == entry


# ------------------------------------------------------------------ the two-step variant
def small_mapping(seed: int, hosts: int = 8):
    return parse_mapping(synthetic_preset("production_small", seed, hosts=hosts),
                         "test").state


def test_two_step_env_passes_gymnasiums_checker():
    check_env(VMR2LTwoStepEnv(hosts=8, mnl=4), skip_render_check=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_step_gives_the_same_migrations_and_rewards_as_the_one_step_env(seed):
    """The same (VM, slot) choices, legal and forbidden, as two steps or as one: the same
    states, rewards and episode end; the VM stage changes nothing and pays nothing."""
    state = small_mapping(seed)
    one, two = VMR2LEnv(hosts=8, mnl=6), VMR2LTwoStepEnv(hosts=8, mnl=6)
    one.reset(options={"mapping": state})
    obs, _ = two.reset(options={"mapping": state})
    rng = np.random.default_rng(seed)
    done, steps = False, 0
    while not done:
        vm_legal = np.flatnonzero(two.action_masks())
        assert np.array_equal(two.action_masks()[:one.config.vm_capacity], one.vm_mask())
        forbidden_vm = rng.random() < 0.15
        token = int(rng.integers(two.action_space.n)) if forbidden_vm else int(
            rng.choice(vm_legal))
        obs2, r_vm, term, _, info = two.step(token)
        steps += 1
        if forbidden_vm and token not in vm_legal:
            _, r1, done1, _, info1 = one.step((-1, 0))
            assert (r_vm, term, info["invalid"]) == (r1, done1, True)
            done = term
            continue
        assert (r_vm, term, info["stage"], obs2["stage"]) == (0.0, False, 1, 1)
        assert obs2["chosen"][token] == 1 and obs2["chosen"].sum() == 1
        assert np.array_equal(obs2["hosts"], obs["hosts"])
        slot_mask = two.action_masks()
        assert np.array_equal(slot_mask[:2 * one.config.max_hosts], one.slot_mask(token))
        slot = int(rng.choice(np.flatnonzero(slot_mask))) if rng.random() < 0.85 else int(
            rng.integers(two.action_space.n))
        obs, r2, done, _, info2 = two.step(slot)
        steps += 1
        # past the slots (16 here, of 128 actions) is a no-op, as a forbidden VM is
        _, r1, done1, _, info1 = one.step((token, slot) if slot < 16 else (-1, 0))
        assert (r2, done, info2["moved"], info2["invalid"]) == (
            r1, done1, info1["moved"], info1["invalid"])
        assert obs["stage"] == 0 and not obs["chosen"].any()
    assert np.array_equal(one.state.vm_host, two.state.vm_host)
    assert one.t == two.inner.t == 6 and steps <= 12


def test_two_step_observations_are_new_arrays_each_step():
    env = VMR2LTwoStepEnv(hosts=8, mnl=2)
    obs, _ = env.reset(seed=0)
    nxt, *_ = env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert not np.shares_memory(obs["hosts"], nxt["hosts"])


# ------------------------------------------------------- policies as allocator/rescheduler
class MostFreeCpu(NaraEnvPolicy):
    """A fixed policy on the observation: the eligible server with the most free cpu
    relative to the request (node feature 0), lowest index on ties."""

    name = "_test_most_free"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[dict] = []

    def act(self, obs, mask):
        self.seen.append(obs)
        score = np.where(mask, obs["nodes"][:mask.shape[0], 0], -np.inf)
        return int(np.argmax(score))


@pytest.mark.parametrize("padded", [False, True])
def test_nara_policy_allocator_sees_what_the_environment_shows(padded):
    """The same policy, run by the engine as an allocator and by a NaraEnv episode on the
    same seed: identical observations at every choice, identical placements."""
    sizes = dict(max_nodes=64, max_edges=128, max_servers=48) if padded else {}
    env = NaraEnv(requests=24, **sizes)
    obs, _ = env.reset(seed=5)
    env_obs, done = [], False
    policy = MostFreeCpu(MostFreeCpu.Options(**sizes))
    while not done:
        env_obs.append(obs)
        obs, _, done, _, _ = env.step(policy.act(obs, env.action_masks()))
    episode = [p for _, p in env.results]

    alloc = MostFreeCpu(MostFreeCpu.Options(**sizes))
    eng = Engine(env.topology, env.source, alloc, np.random.default_rng(5),
                 EngineConfig(capacity=env.config.capacity,
                              departures=env.config.departures))
    eng.run()
    assert len(alloc.seen) == len(env_obs) > 24
    for a, b in zip(alloc.seen, env_obs, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]), k
    assert eng.accepted == sum(p is not None for p in episode)


def test_nara_policy_allocator_refuses_a_forbidden_choice_and_a_small_space():
    class Bad(NaraEnvPolicy):
        name = "_test_bad"

        def act(self, obs, mask):
            return mask.shape[0]   # past the servers

    env = NaraEnv(requests=4)
    eng = Engine(env.topology, env.source, Bad(), np.random.default_rng(0), EngineConfig())
    with pytest.raises(PluginError, match="forbids"):
        eng.run()
    small = MostFreeCpu(MostFreeCpu.Options(max_servers=8))
    eng = Engine(env.topology, env.source, small, np.random.default_rng(0), EngineConfig())
    with pytest.raises(Exception, match="trained for at most"):
        eng.run()


class Scripted(VMR2LTwoStepPolicy):
    """Replays a list of actions (each must be legal)."""

    name = "_test_scripted"

    def __init__(self, actions, **kw):
        super().__init__(**kw)
        self.actions = list(actions)

    def act(self, obs, mask):
        return self.actions.pop(0)


def test_vmr2l_policy_rescheduler_returns_the_migrations_the_environment_applied():
    state = small_mapping(4)
    env = VMR2LTwoStepEnv(hosts=8, mnl=5)
    obs, _ = env.reset(options={"mapping": state})
    rng = np.random.default_rng(1)
    actions, done = [], False
    while not done:
        a = int(rng.choice(np.flatnonzero(env.action_masks())))
        actions.append(a)
        obs, _, done, _, _ = env.step(a)
    result = Scripted(actions).run(state, 5)
    assert np.array_equal(result.state.vm_host, env.state.vm_host)
    assert result.fr_after == pytest.approx(env.state.fragment_rate())
    assert len(result.records) == len(result.migrations) <= 5
    with pytest.raises(PluginError, match="forbids"):
        Scripted([10_000]).run(state, 5)


# ------------------------------------------------------------ a standard library (optional)
@pytest.mark.skipif(importlib.util.find_spec("sb3_contrib") is None,
                    reason="sb3-contrib is not installed (pip install sb3-contrib)")
@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("dcsim/Nara-v0", {"requests": 8}),
    ("dcsim/VMR2L-TwoStep-v0", {"hosts": 6, "mnl": 3}),
])
def test_maskable_ppo_trains_on_the_environment_without_wrappers(env_id, kwargs):
    from sb3_contrib import MaskablePPO

    env = gym.make(env_id, **kwargs)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=32, batch_size=16, n_epochs=1,
                        seed=0, device="cpu")
    model.learn(32)
    obs, _ = env.reset(seed=1)
    mask = env.unwrapped.action_masks()
    action, _ = model.predict(obs, action_masks=mask, deterministic=True)
    assert mask[int(action)]
