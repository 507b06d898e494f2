"""What a process imports before it needs it (issue #37): ``import dcsim`` and a
``dcsim reschedule`` load neither the engine nor the heavy libraries they never use."""

from __future__ import annotations

import json
import subprocess
import sys

import dcsim
from dcsim.vm.synthetic import synthetic_preset

HEAVY = ("simpy", "scipy.stats", "scipy.optimize", "pandas", "pyarrow", "networkx", "numba",
         "gymnasium", "torch", "dcsim.sim", "dcsim.runner.execute")


def loaded_after(code: str) -> list[str]:
    probe = ("import atexit, sys\n"
             f"atexit.register(lambda: print('LOADED', [m for m in {HEAVY!r} "
             "if m in sys.modules], file=sys.stderr))\n" + code)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=120)
    line = [x for x in r.stderr.splitlines() if x.startswith("LOADED")]
    assert line, r.stderr
    return eval(line[-1].split(" ", 1)[1])


def test_import_dcsim_loads_nothing_heavy():
    assert loaded_after("import dcsim") == []


def test_import_dcsim_leaves_signals_and_environment_alone(tmp_path):
    """No side effect at import, even in a script named like the command: SIGINT and the
    environment variables are the program's (:func:`dcsim.cli.program`) to set."""
    script = tmp_path / "dcsim"
    script.write_text("import os, signal\n"
                      "before = signal.getsignal(signal.SIGINT), dict(os.environ)\n"
                      "import dcsim\n"
                      "print(before == (signal.getsignal(signal.SIGINT), dict(os.environ)))\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip() == "True", r.stderr


def test_every_export_of_dcsim_resolves():
    for name in dcsim.__all__:
        assert getattr(dcsim, name) is not None, name


def test_reschedule_greedy_imports_no_engine_and_no_heavy_library(tmp_path):
    mapping = tmp_path / "m.json"
    mapping.write_text(json.dumps(synthetic_preset("small", 2)))
    argv = ["dcsim", "reschedule", str(mapping), "--algorithm", "greedy", "--mnl", "5"]
    code = f"sys.argv = {argv!r}\nfrom dcsim.cli import main\nmain()\n"
    assert loaded_after(code) == []
