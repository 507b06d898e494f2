"""What the tests of interrupted and resumed experiments share: a small quickstart
experiment written to a file, and a hook run before every loss-mode run."""

from __future__ import annotations

from pathlib import Path

import yaml

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.yaml"


def patch_loss_runs(monkeypatch, action) -> None:
    """``action(plan)`` runs before every loss-mode run (pool workers are forked, so they
    see the patch)."""
    from dcsim.modes.loss.mode import LossMode

    real = LossMode.build

    def patched(self, spec, plan, *args):
        action(plan)
        return real(self, spec, plan, *args)

    monkeypatch.setattr(LossMode, "build", patched)


def small_quickstart(tmp_path: Path, seeds: int = 3) -> Path:
    """The quickstart experiment at 300 requests, ``seeds`` seeds and a 20-request warm-up,
    written to ``tmp_path/small.yaml``."""
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=seeds, warmup={"requests": 20})
    cfg["workload"]["requests"] = 300
    f = tmp_path / "small.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f
