"""Expanding experiments into runs and executing them (serially or on a process pool)."""

from dcsim.runner.execute import execute_run, run_experiment
from dcsim.runner.plan import Experiment, RunPlan, load_experiment

__all__ = ["Experiment", "RunPlan", "execute_run", "load_experiment", "run_experiment"]
