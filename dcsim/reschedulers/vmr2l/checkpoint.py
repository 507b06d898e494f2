"""VMR²L policy checkpoints: ``NAME.npz`` (float32 arrays named as the PyTorch
``state_dict``) and ``NAME.json`` (format, architecture, feature layout, training record);
the shipped ones; every problem a ConfigError naming the file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.checkpoints import (
    check_field,
    float_arrays,
    read_arrays,
    read_metadata,
    resolve,
    write_checkpoint,
)
from dcsim.errors import ConfigError
from dcsim.reschedulers.vmr2l.features import HOST_FEATURE_NAMES, VM_FEATURE_NAMES
from dcsim.reschedulers.vmr2l.network import Architecture, weight_shapes

CHECKPOINT_FORMAT = "dcsim-vmr2l-policy"
CHECKPOINT_VERSION = 1
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "learn" / "checkpoints"
#: the ``vmr2l`` plugin's default policy
SHIPPED_NAME = "vmr2l_production"


# ------------------------------------------------------------------------------ checkpoints
@dataclass
class Checkpoint:
    """A loaded policy: arrays, architecture, metadata."""

    path: Path
    weights: dict[str, np.ndarray]
    arch: Architecture
    meta: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(path: str | Path, weights: dict[str, np.ndarray], arch: Architecture,
                    meta: dict[str, Any] | None = None) -> Path:
    """Write ``path`` (.npz) and the .json beside it, each atomically."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, not {path}")
    arrays = float_arrays(weights, weight_shapes(arch))
    doc = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
           "architecture": {**asdict(arch), "norm": "post-LN (nn.Transformer)",
                            "activation": "gelu (erf)"},
           "features": {"hosts": HOST_FEATURE_NAMES, "vms": VM_FEATURE_NAMES,
                        "step": "t / MNL", "tokens": "migratable VMs, in mapping order",
                        "slots": "2h + j: host h, NUMA j (double-NUMA VMs: j = 0)"},
           **(meta or {})}
    return write_checkpoint(path, arrays, doc)


def shipped_checkpoints() -> dict[str, Path]:
    """The shipped VMR²L policies by name (``vmr2l_<name>.npz`` in the package)."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("vmr2l_*.npz"))}


def checkpoint_path(value: str | None) -> Path:
    """The ``.npz`` a ``checkpoint`` option names: None is the shipped default, a shipped
    name that policy, anything else a file path."""
    return resolve(SHIPPED_NAME if value is None else value, shipped_checkpoints(), "VMR²L")


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint; every problem is a ConfigError naming the file."""
    path = Path(path)
    meta = read_metadata(path, CHECKPOINT_FORMAT, "VMR2L")
    try:
        a = meta["architecture"]
        arch = Architecture(**{k: a[k] for k in Architecture.__dataclass_fields__})
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{path.with_suffix('.json')}: bad or missing architecture field: "
                          f"{e}") from None
    if meta.get("format_version") != CHECKPOINT_VERSION:
        raise ConfigError(f"{path.with_suffix('.json')}: format_version "
                          f"{meta.get('format_version')!r} is not {CHECKPOINT_VERSION}")
    _check_sidecar(meta, path.with_suffix(".json"))
    return Checkpoint(path, read_arrays(path, weight_shapes(arch)), arch, meta)


#: the feature layout dcsim computes (the sidecars before it was written down have none)
FEATURE_VERSION = 1


def _check_sidecar(meta: dict[str, Any], jpath: Path) -> None:
    """The sidecar's fields that change what the weights mean: the activation and norm of
    the transformer, the feature version and the resources (VMR²L reads cpu and memory per
    NUMA node). Descriptive fields (feature names, the training record) are not read."""
    check_field(meta, "architecture", "activation", ["gelu (erf)", "gelu"], jpath,
                "the network applies the erf GELU")
    check_field(meta, "architecture", "norm", ["post-LN (nn.Transformer)", "post-LN"], jpath,
                "the network normalises after each block")
    check_field(meta, "features", "version", [FEATURE_VERSION], jpath,
                "the features dcsim computes")
    check_field(meta, "features", "resources", [["cpu", "mem"]], jpath,
                "VMR²L's features are cpu and memory per NUMA node")
