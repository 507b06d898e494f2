"""Nara policy checkpoints: ``NAME.npz`` plus ``NAME.json`` (format, architecture,
feature version, training record), the shipped ones, and their validation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.allocators.multi.learned.network import Architecture, float64_weights, weight_shapes
from dcsim.allocators.multi.learned.observation import (
    FEATURE_VERSIONS,
    RATIO_CLIP,
    feature_names,
    feature_sizes,
)
from dcsim.checkpoints import (
    check_field,
    float_arrays,
    read_arrays,
    read_metadata,
    resolve,
    shorten,
    write_checkpoint,
)
from dcsim.errors import ConfigError
from dcsim.model import Topology

CHECKPOINT_FORMAT = "dcsim-nara-policy"
CHECKPOINT_VERSION = 1
SHIPPED_DIR = Path(__file__).resolve().parents[3] / "learn" / "checkpoints"
#: The default policy: trained on topology alpha with the uniform request set.
SHIPPED_CHECKPOINT = SHIPPED_DIR / "nara_alpha_uniform.npz"


# --------------------------------------------------------------------------- checkpoint
@dataclass(frozen=True)
class Checkpoint:
    """A loaded policy: its arrays, architecture and JSON metadata."""

    path: Path
    weights: dict[str, np.ndarray]
    arch: Architecture
    meta: dict[str, Any] = field(default_factory=dict)
    features: int = 1            # the feature version the policy was trained on

    @cached_property
    def inference_weights(self) -> dict[str, np.ndarray]:
        """The weights as float64, which the greedy choice computes in
        (:func:`~dcsim.allocators.multi.learned.network.greedy_server`)."""
        return float64_weights(self.weights)

    def check_topology(self, topology: Topology) -> None:
        """ConfigError naming the file if ``topology``'s resources do not fit the policy (the
        sidecar's ``features.resources``, when given, must be the topology's, in order)."""
        trained = (self.meta.get("features") or {}).get("resources")
        if trained is not None and list(trained) != list(topology.resources):
            raise ConfigError(
                f"{self.path.with_suffix('.json')}: features.resources: the policy was trained "
                f"on {shorten(repr(list(trained)))}, but topology {topology.name!r} has "
                f"{list(topology.resources)}")
        f, e, g = feature_sizes(len(topology.resources), self.features)
        if (f, e, g) != (self.arch.node_features, self.arch.edge_features,
                         self.arch.global_features):
            raise ConfigError(
                f"{self.path}: checkpoint expects {self.arch.node_features} node / "
                f"{self.arch.global_features} global features, but topology "
                f"{topology.name!r} with resources {list(topology.resources)} gives {f} / {g}")


def save_checkpoint(path: str | Path, weights: dict[str, np.ndarray], arch: Architecture,
                    meta: dict[str, Any] | None = None,
                    resources: tuple[str, ...] = ("cpu", "mem"), features: int = 1) -> Path:
    """Write ``path`` (.npz, the policy arrays as float32) and the .json beside it, each
    atomically. ``meta`` adds fields (training record, …); ``features`` is the feature
    version the policy reads. Returns the .npz path."""
    sizes = feature_sizes(len(resources), features)
    if sizes != (arch.node_features, arch.edge_features, arch.global_features):
        raise ValueError(f"architecture {arch} does not read feature version {features} of "
                         f"{len(resources)} resources {sizes}")
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, not {path}")
    arrays = float_arrays(weights, weight_shapes(arch))
    doc = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "architecture": {**asdict(arch),
                         "aggregation": "mean over {self} U neighbours of [h, edge]",
                         "activation": "relu",
                         "layout": "nn.Linear (out, in); gnn.i, obs.0-1, logit.0-1"},
        "features": {"version": features, "ratio_clip": RATIO_CLIP,
                     "node_order": "servers first (topology order), then switches",
                     "resources": list(resources),
                     **feature_names(tuple(resources), features)},
        **(meta or {}),
    }
    return write_checkpoint(path, arrays, doc)


def shipped_checkpoints() -> dict[str, Path]:
    """The policies shipped in the package, by name (``nara_<name>.npz``): ``alpha_uniform``,
    ``alpha_azure``, ``alpha_alibaba`` (topology alpha, one per Table 1 request set),
    ``optical_all`` (one policy for the nine 64-server optical topologies of the 2023
    paper, feature version 2), ``optical_<c>_<1xo>`` (one per optical topology) and
    ``optical_<c>_<1xo>_rules`` (the same trained under the baselines' rules, ``eligible:
    any_free``, ``pair_paths: authors_sticky``; for the topologies listed in
    ``docs/reproductions.md``)."""
    return {p.stem.removeprefix("nara_"): p for p in sorted(SHIPPED_DIR.glob("nara_*.npz"))}


def checkpoint_path(value: str | None) -> Path:
    """The ``.npz`` a ``checkpoint`` option names: ``None`` is the shipped alpha-uniform
    policy, a shipped policy's name (:func:`shipped_checkpoints`) that policy, anything else
    a file path (``~`` expanded, relative to the working directory)."""
    if value is None:
        return SHIPPED_CHECKPOINT
    return resolve(value, shipped_checkpoints())


def check_exists(value: str | None) -> None:
    """A ``checkpoint`` value that names no file, or a file that is not a valid policy, is a
    ``ValueError`` (for validators: ``dcsim validate`` reads the checkpoint's contents)."""
    try:
        path = checkpoint_path(value)
    except ConfigError as e:
        raise ValueError(str(e).removeprefix("checkpoint: ")) from None
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    try:
        load_checkpoint(path)
    except ConfigError as e:
        raise ValueError(str(e)) from None


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint (``.npz`` + ``.json`` beside it); any problem is a
    :class:`ConfigError` naming the file. Arrays are read with ``allow_pickle=False``."""
    path = Path(path)
    jpath = path.with_suffix(".json")
    meta = read_metadata(path, CHECKPOINT_FORMAT, "Nara")
    try:
        a = meta["architecture"]
        arch = Architecture(**{k: a[k] for k in Architecture.__dataclass_fields__})
        version = meta["features"]["version"]
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{jpath}: bad or missing architecture/features field: {e}") from None
    if version not in FEATURE_VERSIONS:
        raise ConfigError(f"{jpath}: features.version: {shorten(repr(version))} is not one of "
                          f"{FEATURE_VERSIONS} (the policy was trained on other observations)")
    _check_sidecar(meta, arch, version, jpath)
    weights = read_arrays(path, weight_shapes(arch))
    return Checkpoint(path=path, weights=weights, arch=arch, meta=meta, features=version)


def _check_sidecar(meta: dict[str, Any], arch: Architecture, version: int, jpath: Path) -> None:
    """The sidecar's fields that change what the weights mean: the format version, the
    activation the network applies, the observation's ratio clip, and the resources (their
    number must give the architecture's feature sizes; their names are checked against the
    topology in :meth:`Checkpoint.check_topology`). Descriptive fields (``layout``,
    ``aggregation``, feature names, the training record) are not read."""
    if meta.get("format_version") != CHECKPOINT_VERSION:
        raise ConfigError(f"{jpath}: format_version: {shorten(repr(meta.get('format_version')))} "
                          f"is not {CHECKPOINT_VERSION} (a checkpoint of another dcsim)")
    check_field(meta, "architecture", "activation", ["relu"], jpath,
                "the network applies relu")
    check_field(meta, "features", "ratio_clip", [RATIO_CLIP, int(RATIO_CLIP)], jpath,
                "the observation clips ratios at this value; the policy read other inputs")
    resources = meta["features"].get("resources")
    if resources is None:
        return
    if (not isinstance(resources, list) or not all(isinstance(r, str) for r in resources)
            or len(set(resources)) != len(resources)):
        raise ConfigError(f"{jpath}: features.resources: {shorten(repr(resources))} is not a "
                          "list of distinct resource names")
    sizes = feature_sizes(len(resources), version)
    if sizes != (arch.node_features, arch.edge_features, arch.global_features):
        raise ConfigError(f"{jpath}: features.resources: {len(resources)} resources give "
                          f"{sizes[0]} node / {sizes[2]} global features, but the architecture "
                          f"reads {arch.node_features} / {arch.global_features}")
