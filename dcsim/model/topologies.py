"""Builders for the published topologies, each configured by a pydantic spec.

``build_topology({"kind": "fat_tree", "preset": "ahab_k12"})`` returns a
:class:`~dcsim.model.topology.Topology`. Kinds:

* ``fat_tree`` — AHAB's tree approximation of a fat-tree: root ``core`` → pod switches
  ``p*`` → rack switches ``r*`` → hosts ``h*``. Tier names host/rack/pod (the link tier is
  the upper endpoint's tier, so the host uplink is tier 1).
* ``fabric`` — Nara's (2021) Facebook-Fabric topologies α β γ δ: every rack switch links to
  every fabric switch ``f{pod}_{j}`` of its pod; fabric switch ``j`` of every pod links to
  every spine ``s{j}_{k}`` of plane ``j`` (planes = fabric switches per pod).
* ``optical`` — Nara's 2023 journal topologies (channels per link × oversubscription).
* ``flat`` — servers and no network.
* ``file`` — a user topology file (see :mod:`dcsim.model.topology_io`).

The optical topology, where the 2023 paper is vague: the paper says only that servers
connect to a tier-1 switch, tier-1 switches to "a number of" tier-2 switches and those to
"a number of" tier-3 switches, and gives the channels and per-tier oversubscription of
Table 1. The wiring chosen here is the Fabric wiring of the authors' 2021 paper with two
tier-2 switches per pod (cluster) and two tier-3 switches per plane. That choice reproduces
every oversubscription of Table 1 exactly with 2 racks of 16 servers per pod: a rack takes
16n channels from its servers and sends 2 × c2 upward (1:4 when c2 = 2n, 1:2 when c2 = 4n);
a tier-2 switch takes 2 × c2 from its racks and sends 2 × c3 upward (1:4 for (2n, n/2) and
(4n, n), 1:2 for (4n, 2n)); bottom-to-top 1:16, 1:8, 1:4. ``tier2`` and ``tier3`` change
the counts. For odd n the 1:16 tier-3 link keeps n/2 channels as a fraction; explicit
``tier2_channels``/``tier3_channels`` override the table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import networkx as nx
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from dcsim.errors import ConfigError
from dcsim.model.topology import Topology
from dcsim.registered_union import RegisteredUnion, names, validate
from dcsim.validation import ConfigModel, error_lines

#: the built-in kinds (plugins add theirs through ``register_topologies``)
TOPOLOGY_KINDS = ("fat_tree", "fabric", "optical", "flat", "file")

_RESERVED = {"kind", "tier", "rack", "pod", "plane", "label", "name", "id", "capacity"}


def _check_resources(v: dict[str, float]) -> dict[str, float]:
    if not v:
        raise ValueError("needs at least one resource, e.g. {cpu: 8}")
    bad = sorted(set(v) & _RESERVED)
    if bad:
        raise ValueError(f"resource names {bad} are reserved node attributes")
    return v


def _distinct(v: list[str] | None) -> list[str] | None:
    twice = sorted({r for r in v or () if v.count(r) > 1})
    if twice:
        raise ValueError(f"{', '.join(map(repr, twice))} listed more than once; resource "
                         "names must be distinct")
    return v


#: A server's resource vector, in order: ``{cpu: 10, mem: 10}``.
Resources = Annotated[dict[str, NonNegativeFloat], AfterValidator(_check_resources)]


class TopologyBuilder(ConfigModel):
    """The base of every topology kind, built-in or a plugin's (``register_topologies``):
    a pydantic model whose ``kind: Literal["..."]`` field names it under ``topology:`` and
    whose other fields are its options (unknown fields are errors); ``build()`` returns the
    :class:`~dcsim.model.topology.Topology`. ``name`` overrides the topology's name."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str | None = None

    def build(self) -> Topology:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def _params(self) -> dict[str, Any]:
        """The resolved spec for ``Topology.params``, without keys ``describe()`` owns."""
        d = self.model_dump(exclude={"name"})
        if "servers" in d:  # per rack here; describe()'s "servers" is the total
            d["servers_per_rack"] = d.pop("servers")
        return d


class _PresetSpec(TopologyBuilder):
    """A spec whose unset fields come from its preset (or the default preset)."""

    _presets: ClassVar[dict[str, dict[str, Any]]] = {}
    _default_preset: ClassVar[str] = ""

    @model_validator(mode="after")
    def _fill_from_preset(self) -> _PresetSpec:
        values = self._presets[getattr(self, "preset", None) or self._default_preset]
        for key, value in values.items():
            if getattr(self, key) is None:
                setattr(self, key, dict(value) if isinstance(value, dict) else value)
        return self


# ---------------------------------------------------------------------------- fat tree
#: AHAB: Sec. V (k = 12 fat-tree, 8 CU hosts, 8 BU host links) and Fig. 1 (4 CU, 6/12/24 BU)
FAT_TREE_PRESETS: dict[str, dict[str, Any]] = {
    "ahab_k12": {"pods": 12, "racks": 6, "hosts": 6, "server": {"cpu": 8.0}, "host_link": 8.0},
    "ahab_fig1": {"pods": 2, "racks": 2, "hosts": 2, "server": {"cpu": 4.0}, "host_link": 6.0},
}


class Oversubscription(ConfigModel):
    """Ratio of downstream to upstream bandwidth at a rack's and a pod's uplink."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    rack: PositiveFloat = 1.0
    pod: PositiveFloat = 1.0


class FatTreeSpec(_PresetSpec):
    """AHAB's tree: ``pods`` × ``racks`` × ``hosts``; uplinks sum their children's links."""

    kind: Literal["fat_tree"] = "fat_tree"
    preset: Literal["ahab_k12", "ahab_fig1"] | None = None
    pods: PositiveInt | None = None
    racks: PositiveInt | None = None
    hosts: PositiveInt | None = None
    server: Resources | None = None
    host_link: PositiveFloat | None = None
    rack_link: NonNegativeFloat | None = None
    pod_link: NonNegativeFloat | None = None
    oversubscription: Oversubscription = Field(default_factory=Oversubscription)

    _presets = FAT_TREE_PRESETS
    _default_preset = "ahab_k12"

    def build(self) -> Topology:
        ov = self.oversubscription
        rack_link = self.rack_link
        if rack_link is None:
            rack_link = self.hosts * self.host_link / ov.rack
        pod_link = self.pod_link
        if pod_link is None:
            pod_link = self.racks * rack_link / ov.pod
        g = nx.Graph()
        n_racks = self.pods * self.racks
        for r in range(n_racks):
            for h in range(self.hosts):
                g.add_node(f"h{r * self.hosts + h}", kind="server", tier=0, rack=r,
                           pod=r // self.racks, **self.server)
        for r in range(n_racks):
            g.add_node(f"r{r}", kind="switch", tier=1, rack=r, pod=r // self.racks)
        for p in range(self.pods):
            g.add_node(f"p{p}", kind="switch", tier=2, pod=p)
        g.add_node("core", kind="switch", tier=3)
        for r in range(n_racks):
            for h in range(self.hosts):
                g.add_edge(f"h{r * self.hosts + h}", f"r{r}", capacity=float(self.host_link))
            g.add_edge(f"r{r}", f"p{r // self.racks}", capacity=float(rack_link))
        for p in range(self.pods):
            g.add_edge(f"p{p}", "core", capacity=float(pod_link))
        params = self._params() | {"rack_link": rack_link, "pod_link": pod_link}
        return Topology.from_graph(
            g, name=self.name or self.preset or "fat_tree", resources=list(self.server),
            tier_names={1: "host", 2: "rack", 3: "pod"}, params=params, source="fat_tree",
        )


# ---------------------------------------------------------------------------- fabric
#: Nara (2021) Appendix F/G; spines are per plane, planes = fabric switches per pod
FABRIC_PRESETS: dict[str, dict[str, Any]] = {
    name: {"pods": p, "racks": r, "servers": s, "fabric": f, "spines": sp,
           "sr": 1.0, "rf": u, "fs": u, "server": {"cpu": 10.0, "mem": 10.0}}
    for name, p, r, s, f, sp, u in [
        ("alpha", 2, 2, 10, 2, 1, 1.0),
        ("beta", 2, 4, 5, 2, 1, 1.0),
        ("gamma", 4, 4, 40, 4, 2, 2.0),
        ("delta", 4, 16, 40, 4, 8, 2.0),
    ]
}
_GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta"}


def _three_tier(pods: int, racks: int, servers: int, tier2: int, tier3: int,
                caps: tuple[float, float, float], server: dict[str, float]) -> nx.Graph:
    """Fabric wiring: rack → every tier-2 switch of its pod; tier-2 ``j`` → plane ``j``."""
    g = nx.Graph()
    n_racks = pods * racks
    for r in range(n_racks):
        for s in range(servers):
            g.add_node(f"h{r * servers + s}", kind="server", tier=0, rack=r, pod=r // racks,
                       **server)
    for r in range(n_racks):
        g.add_node(f"r{r}", kind="switch", tier=1, rack=r, pod=r // racks)
    for p in range(pods):
        for j in range(tier2):
            g.add_node(f"f{p}_{j}", kind="switch", tier=2, pod=p, plane=j)
    for j in range(tier2):
        for k in range(tier3):
            g.add_node(f"s{j}_{k}", kind="switch", tier=3, plane=j)
    for r in range(n_racks):
        for s in range(servers):
            g.add_edge(f"h{r * servers + s}", f"r{r}", capacity=float(caps[0]))
        for j in range(tier2):
            g.add_edge(f"r{r}", f"f{r // racks}_{j}", capacity=float(caps[1]))
    for p in range(pods):
        for j in range(tier2):
            for k in range(tier3):
                g.add_edge(f"f{p}_{j}", f"s{j}_{k}", capacity=float(caps[2]))
    return g


class FabricSpec(_PresetSpec):
    """Nara (2021) Fabric topology; presets α β γ δ of the paper's Appendix F."""

    kind: Literal["fabric"] = "fabric"
    preset: Literal["alpha", "beta", "gamma", "delta", "α", "β", "γ", "δ"] | None = None
    pods: PositiveInt | None = None
    racks: PositiveInt | None = Field(None, description="racks per pod")
    servers: PositiveInt | None = Field(None, description="servers per rack")
    fabric: PositiveInt | None = Field(None, description="fabric switches per pod (= planes)")
    spines: PositiveInt | None = Field(None, description="spine switches per plane")
    sr: PositiveFloat | None = Field(None, description="server-rack link bandwidth")
    rf: PositiveFloat | None = Field(None, description="rack-fabric link bandwidth")
    fs: PositiveFloat | None = Field(None, description="fabric-spine link bandwidth")
    server: Resources | None = None

    _presets = FABRIC_PRESETS
    _default_preset = "alpha"

    @field_validator("preset")
    @classmethod
    def _latin(cls, v: str | None) -> str | None:
        return _GREEK.get(v, v) if v is not None else None

    def build(self) -> Topology:
        g = _three_tier(self.pods, self.racks, self.servers, self.fabric, self.spines,
                        (self.sr, self.rf, self.fs), self.server)
        name = self.name or (f"fabric-{self.preset}" if self.preset else "fabric")
        return Topology.from_graph(
            g, name=name, resources=list(self.server),
            tier_names={1: "server-rack", 2: "rack-fabric", 3: "fabric-spine"},
            params=self._params(), source="fabric",
        )


# ---------------------------------------------------------------------------- optical
#: (tier-2, tier-3) channels per link as multiples of the tier-1 channels n (2023, Table 1)
OPTICAL_RATIOS = {"1:16": (2.0, 0.5), "1:8": (4.0, 1.0), "1:4": (4.0, 2.0)}


#: 2023 paper, Sec. 4A: the 64-server training/test topology, and the scaled-up test
#: topology of "1024 servers" (the paper's "4 clusters of 4 racks each with 16 servers" is
#: only 256; dcsim takes the stated total, 4 pods x 16 racks x 16 servers). The scaled one
#: has one tier-3 switch per plane for each rack of a pod, so every tier keeps the
#: oversubscription of Table 1.
#: ``authors_small`` and ``authors_large`` are the wirings of the authors' code
#: (``zawaki/allocation_neurips_2021_mlfs``, ``topologies/small`` and ``topologies/large``,
#: the 2023 topologies with 16-unit servers): 64 servers with ONE tier-3 switch per plane, and
#: 1024 servers as 8 pods x 8 racks x 16 servers, each pod's two tier-2 switches linked to the
#: 4 tier-3 switches of their plane. Their code sets the channels per tier with the same
#: multipliers of n as :data:`OPTICAL_RATIOS` (``baseline_rollout.py``), so on these wirings
#: the tier-2 to tier-3 ratio is not Table 1's: the labels name the multipliers.
OPTICAL_PRESETS: dict[str, dict[str, Any]] = {
    "small": {"pods": 2, "racks": 2, "servers": 16, "tier2": 2, "tier3": 2},
    "scaled": {"pods": 4, "racks": 16, "servers": 16, "tier2": 2, "tier3": 16},
    "authors_small": {"pods": 2, "racks": 2, "servers": 16, "tier2": 2, "tier3": 1},
    "authors_large": {"pods": 8, "racks": 8, "servers": 16, "tier2": 2, "tier3": 4},
}


class OpticalSpec(_PresetSpec):
    """Nara (2023) optical topology: capacities are channels per link."""

    kind: Literal["optical"] = "optical"
    preset: Literal["small", "scaled", "authors_small", "authors_large"] | None = None
    pods: PositiveInt | None = None
    racks: PositiveInt | None = Field(None, description="racks per pod (cluster)")
    servers: PositiveInt | None = Field(None, description="servers per rack")
    tier2: PositiveInt | None = Field(None, description="tier-2 switches per pod (= planes)")
    tier3: PositiveInt | None = Field(None, description="tier-3 switches per plane")
    channels: PositiveInt = Field(16, description="channels per tier-1 link (n)")
    oversubscription: Literal["1:16", "1:8", "1:4"] = "1:8"
    tier2_channels: PositiveFloat | None = None
    tier3_channels: PositiveFloat | None = None
    server: Resources = Field(default_factory=lambda: {"cpu": 16.0, "mem": 16.0})

    _presets = OPTICAL_PRESETS
    _default_preset = "small"

    def link_channels(self) -> tuple[float, float, float]:
        """Channels per link at tiers 1, 2, 3."""
        m2, m3 = OPTICAL_RATIOS[self.oversubscription]
        n = float(self.channels)
        c2 = self.tier2_channels if self.tier2_channels is not None else m2 * n
        c3 = self.tier3_channels if self.tier3_channels is not None else m3 * n
        return n, float(c2), float(c3)

    def build(self) -> Topology:
        caps = self.link_channels()
        g = _three_tier(self.pods, self.racks, self.servers, self.tier2, self.tier3, caps,
                        self.server)
        params = self._params()
        params["link_channels"] = list(caps)
        return Topology.from_graph(
            g, name=self.name or (f"optical-{self.channels}-{self.oversubscription}"
                                  + (f"-{self.preset}" if self.preset not in (None, "small")
                                     else "")),
            resources=list(self.server),
            tier_names={1: "tier-1", 2: "tier-2", 3: "tier-3"},
            params=params, source="optical",
        )


# ---------------------------------------------------------------------------- flat
class FlatSpec(TopologyBuilder):
    """``servers`` identical servers and no network (zero links, no rack or pod ids)."""

    kind: Literal["flat"] = "flat"
    servers: PositiveInt = 1
    server: Resources = Field(default_factory=lambda: {"cpu": 10.0, "mem": 10.0})

    def build(self) -> Topology:
        g = nx.Graph()
        for i in range(self.servers):
            g.add_node(f"h{i}", kind="server", tier=0, **self.server)
        return Topology.from_graph(
            g, name=self.name or "flat", resources=list(self.server),
            params={"kind": "flat"}, source="flat", allow_disconnected=True,
        )


# ---------------------------------------------------------------------------- file
class FileSpec(TopologyBuilder):
    """A topology file: networkx node-link JSON or GraphML."""

    kind: Literal["file"] = "file"
    path: str
    format: Literal["json", "graphml"] | None = None
    resources: Annotated[list[str] | None, AfterValidator(_distinct)] = None
    #: the file's bounds, checked before it is parsed (dcsim.model.topology_io.LIMITS);
    #: raise them for a trusted file
    max_bytes: Annotated[int, Field(ge=1)] | None = None
    max_nodes: Annotated[int, Field(ge=1)] | None = None
    max_links: Annotated[int, Field(ge=0)] | None = None

    def build(self) -> Topology:
        from dcsim.model.topology_io import load_topology

        limits = {k: v for k, v in (("max_bytes", self.max_bytes),
                                    ("max_nodes", self.max_nodes),
                                    ("max_links", self.max_links)) if v is not None}
        topo = load_topology(self.path, format=self.format, resources=self.resources,
                             limits=limits)
        if self.name:
            topo.name = self.name
        topo.params.update({"kind": "file", "path": self.path})
        return topo


# ---------------------------------------------------------------------------- dispatch
#: a ``topology:`` value: any registered kind (the built-ins, then plugins')
TopologySpec = RegisteredUnion("topology")


def parse_topology_spec(spec: Any, prefix: str = "topology") -> TopologyBuilder:
    """Validate a plain dict into a spec model of its registered ``kind``; errors name the
    field under ``prefix``."""
    if isinstance(spec, TopologyBuilder):
        return spec
    if not isinstance(spec, dict):
        raise ConfigError(f"{prefix}: expected a mapping with a 'kind', got {spec!r}")
    try:
        return validate("topology", spec)
    except ValidationError as exc:
        raise ConfigError(error_lines(exc, prefix, spec, kinds=names("topology"))) from None


#: the most servers a generated topology may have (a typo such as servers: 10**12 would
#: otherwise allocate until the machine runs out of memory)
MAX_SERVERS = 5_000_000


def build_topology(spec: Any, base_dir: str | Path | None = None) -> Topology:
    """Build the topology described by ``spec`` (a spec model or a plain dict).

    A relative ``path`` of a ``file`` topology is looked up in ``base_dir`` (the experiment
    file's folder) first, then in the working directory, like trace paths.
    """
    parsed = parse_topology_spec(spec)
    counts = [getattr(parsed, k, None) for k in ("pods", "racks", "hosts", "servers")]
    total = math.prod(c for c in counts if isinstance(c, int))
    if total > MAX_SERVERS:
        raise ConfigError(f"topology: {total:,} servers (the product of pods, racks and "
                          f"servers/hosts) is more than dcsim builds ({MAX_SERVERS:,})")
    if isinstance(parsed, FileSpec) and base_dir is not None:
        path = Path(parsed.path)
        if not path.is_absolute() and (Path(base_dir) / path).exists():
            parsed = parsed.model_copy(update={"path": str(Path(base_dir) / path)})
    return parsed.build()
