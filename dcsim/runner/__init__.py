"""Expanding experiments into runs and executing them (serially or on a process pool)."""

from typing import TYPE_CHECKING

from dcsim.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from dcsim.runner.execute import execute_run, run_experiment
    from dcsim.runner.plan import Experiment, RunPlan, load_experiment

__all__ = ["Experiment", "RunPlan", "execute_run", "load_experiment", "run_experiment"]

#: imported on first use (PEP 562): a command that needs only one submodule
#: (``dcsim.runner.progress``, ``dcsim.modes.reschedule.command``) does not load the engine
_LAZY = {"execute_run": "dcsim.runner.execute", "run_experiment": "dcsim.runner.execute",
         "Experiment": "dcsim.runner.plan", "RunPlan": "dcsim.runner.plan",
         "load_experiment": "dcsim.runner.plan"}


__getattr__ = lazy_getattr(__name__, _LAZY)
