"""A Gymnasium environment for Nara's server-by-server allocation (``dcsim/Nara-v0``).

One ``step(action)`` chooses one server for the current request. The environment runs the
*same* engine (:class:`~dcsim.modes.loss.engine.Engine`, loss mode or ``capacity: wait``) and the
*same* allocation step (:func:`~dcsim.allocators.multi.step.allocate_multi_steps`: ``min(free,
remaining)`` from each chosen server, the k-shortest-path check, both reservations) as the
baselines: its allocator's ``allocate()`` returns a generator that yields a SimPy event at
every choice; the engine's arrival process waits on it (``yield from``), the environment
steps the simulation until such an event is pending, returns the observation, and
``step(action)`` interrupts the waiting arrival process with the chosen server as the
interrupt's cause (SimPy schedules interrupts ahead of everything else at the same simulated
instant, so nothing else happens in between — exactly as when a baseline chooses inside
``allocate()``).

Observation (``gymnasium.spaces.Dict``; :class:`~dcsim.allocators.multi.learned.Observer`
defines the features): ``nodes`` (max_nodes × F), ``edges`` (max_edges × 2),
``edge_index`` (2 × max_edges), ``globals`` (G), ``node_mask`` / ``edge_mask`` (1 for real
entries, 0 for padding) and ``action_mask`` (max_servers: the servers
:meth:`~dcsim.allocators.multi.step.Partial.eligible` offers; padding 0). Nodes are servers first,
so action ``i`` is node ``i``. ``max_nodes``/``max_edges``/``max_servers`` fix the padded
sizes (one policy for every topology up to them); left at ``None`` they are the topology's
own (unpadded).

Reward: ``reward_success`` (+10) when a request is placed, ``reward_failure`` (−10) when it
fails, ``reward_step`` (0) for a choice that does neither (the paper's x, y, z). A step's
reward is the sum over the requests decided while it ran (the chosen one, and any that fail
before the next choice without one: with ``capacity: reject`` a request nothing can hold).
An invalid action (a masked or padded server) fails the request (``info["invalid_action"]``).

``topologies`` (a list of ``topology:`` sections) replaces ``topology``: every ``reset``
draws one of them uniformly with the environment's own generator (``self.np_random``, so
``reset(seed=s)`` fixes the draw as well as the requests), and the episode runs on it;
``info["topology"]`` is its index. The padded sizes are the largest of the list's, so one
policy batch holds any of them. ``features`` is the observation's feature version
(:mod:`dcsim.allocators.multi.learned`; 1, the fabric policies', by default).

An episode is ``requests`` arrivals of the workload (``workload:`` and ``topology:`` as in
an experiment file; :func:`env_config_from_experiment` reads them from one);
``reset(seed=s)`` draws the workload from ``np.random.default_rng(s)``, exactly as an
:class:`~dcsim.modes.loss.engine.Engine` given that generator, so a baseline run on the same seed
sees the same requests. The episode terminates after the last arrival's
decision (departures still pending are not simulated).

``render_mode`` (Gymnasium's keyword; :mod:`dcsim.environments`): ``"ansi"``, ``render()`` is
a few lines of text (the simulated time, the requests so far, the utilisation per resource
and of the links, the pending request: its demand, the servers chosen, what remains, how
many servers the mask offers); ``"rgb_array"``, an image with a bar per server and resource
(the used fraction), the servers the mask offers marked green and those chosen for the
pending request dark (one column group per action index, padding blank).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import simpy
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dcsim.allocators.base import FIRST_STEP
from dcsim.allocators.multi.learned import GraphLayout, Observer, feature_sizes
from dcsim.allocators.multi.step import MultiServerAllocator, Partial, allocate_multi_steps
from dcsim.environments import (
    RENDER_MODES,
    Rendered,
    bars_image,
    checked_render_mode,
    register_envs,
)
from dcsim.errors import ConfigError, DcsimError
from dcsim.model import Placement, Request, StateView
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.validation import first_error
from dcsim.workload.spec import build_source

__all__ = ["ENV_ID", "NaraEnv", "NaraEnvConfig", "env_config_from_experiment",
           "load_env_config", "observation_space", "padded_observation", "padded_statics"]

ENV_ID = "dcsim/Nara-v0"

#: The uniform request set of experiments/nara_table1.yaml (alpha, H = 30).
UNIFORM_WORKLOAD: dict[str, Any] = {
    "name": "uniform",
    "arrival": {"process": "tick"},
    "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 50},
               "mem": {"dist": "uniform_int", "low": 1, "high": 50}},
    "duration": {"dist": "uniform_int", "low": 1, "high": 30},
    "bandwidth": {"dist": "uniform", "low": 0.1, "high": 1.0},
}


class NaraEnvConfig(BaseModel):
    """Environment settings; ``topology`` and ``workload`` are experiment-file sections."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    topology: dict[str, Any] = Field(default_factory=lambda: {"kind": "fabric",
                                                              "preset": "alpha"})
    # when given (non-empty), one of these is drawn per episode and `topology` is unused
    topologies: list[dict[str, Any]] | None = Field(None, min_length=1)
    features: Literal[1, 2] = 1                      # observation feature version
    workload: dict[str, Any] = Field(default_factory=lambda: dict(UNIFORM_WORKLOAD))
    requests: int = Field(32, ge=1)                  # per episode (paper: 32 in training)
    capacity: Literal["wait", "reject"] = "wait"     # the authors' environment: wait
    departures: Literal["before_arrivals", "after_first_step"] = "before_arrivals"
    reservation: Literal["union", "per_pair_channel"] = "union"
    k_paths: int = Field(3, ge=1)
    eligible: Literal["needed", "any_free"] = "needed"   # the action mask (Partial.eligible)
    pair_paths: Literal["all", "cpu", "authors_sticky"] = "all"  # pairs that need a path
    reward_success: float = 10.0
    reward_failure: float = -10.0
    reward_step: float = 0.0
    max_nodes: int | None = Field(None, ge=1)
    max_edges: int | None = Field(None, ge=0)
    max_servers: int | None = Field(None, ge=1)
    holding_scale: float | None = Field(None, gt=0)  # default: 2 x the mean holding time
    base_dir: str | None = None                      # for relative trace/topology paths


def env_config_from_experiment(path: str | Path, **overrides: Any) -> NaraEnvConfig:
    """The environment of an experiment file: its ``topology:``, ``workload:`` (episode
    length = ``workload.requests``), ``capacity:``, ``departures:`` and the first allocator's
    ``reservation``/``k_paths`` options (the ``matrix:`` is not expanded: its base point);
    relative paths resolve against the file's folder. ``overrides`` replace fields."""
    from dcsim.config_files import read_yaml

    path = Path(path)
    data = read_yaml(path)
    raw: dict[str, Any] = {"base_dir": str(path.resolve().parent)}
    for key in ("topology", "workload", "capacity", "departures"):
        if key in data:
            raw[key] = data[key]
    wl = raw.get("workload")
    if isinstance(wl, dict) and wl.get("requests"):
        raw["requests"] = wl["requests"]
    allocs = data.get("allocators") or []
    if allocs and isinstance(allocs[0], dict):
        opts = allocs[0].get("options") or {}
        raw.update({k: opts[k] for k in ("reservation", "k_paths", "eligible", "pair_paths")
                    if k in opts})
    raw.update(overrides)
    return load_env_config(raw, where=str(path))


def load_env_config(raw: dict[str, Any] | NaraEnvConfig | None, where: str = "env"
                    ) -> NaraEnvConfig:
    """Validate an environment config; errors are ConfigError naming the field."""
    if isinstance(raw, NaraEnvConfig):
        return raw
    try:
        return NaraEnvConfig.model_validate(raw or {})
    except ValidationError as e:
        raise ConfigError(first_error(e, where)) from None


class AgentAllocator(MultiServerAllocator):
    """The environment's allocator: the Nara step, each choice handed to the agent.

    ``allocate()`` returns a generator (a *stepwise* decision, see
    :mod:`dcsim.modes.loss.engine`): at each choice it sets :attr:`pending` to ``(partial, event)``
    and waits on ``event``; the environment delivers the chosen server (None: fail the
    request) by interrupting the waiting arrival process with it as the cause. Under the
    engine's ``view.step_boundaries`` it passes the step's
    :data:`~dcsim.allocators.base.FIRST_STEP` on to the engine, as every multi-server
    allocator does. A
    request with no eligible server left fails without asking. Finished requests are
    appended to :attr:`results` as ``(request, placement or None)``.
    """

    name = "_nara_agent"
    description = "the NaraEnv agent (not a registered plugin)"

    def __init__(self, options=None, *, rng=None, topology=None):
        super().__init__(options, rng=rng, topology=topology)
        self.sim: simpy.Environment | None = None
        self.pending: tuple[Partial, simpy.Event] | None = None
        self.results: list[tuple[Request, Placement | None]] = []

    def choose(self, partial: Partial, view: StateView) -> int | None:  # pragma: no cover
        raise NotImplementedError("AgentAllocator chooses through the environment")

    def allocate(self, request: Request, view: StateView):
        if not hasattr(self, "path_service"):
            self.setup(view)
        return self._decide(request, view)

    def _decide(self, request: Request, view: StateView):
        o = self.options
        steps = allocate_multi_steps(request, view, self.paths, o.reservation, self.label,
                                     o.eligible, o.pair_paths,
                                     step_boundaries=view.step_boundaries)
        part = next(steps)
        try:
            while True:
                if part is FIRST_STEP:  # departures: after_first_step: the engine releases
                    yield FIRST_STEP    # the requests ending now, then the step goes on
                    part = steps.send(None)
                    continue
                if part.eligible().any():
                    ev = self.sim.event()   # never triggered: the choice arrives as an
                    self.pending = (part, ev)   # interrupt of the waiting arrival process
                    try:
                        server = yield ev
                    except simpy.Interrupt as choice:
                        server = choice.cause
                else:
                    server = None
                part = steps.send(server)
        except StopIteration as stop:
            result = stop.value
        self.results.append((request, result))
        return result


class NaraEnv(Rendered, gym.Env):
    """Choose the servers of Nara's multi-server requests one at a time (module docstring).

    ``NaraEnv(config)`` with a :class:`NaraEnvConfig` or a mapping of its fields; keyword
    arguments override fields (``gymnasium.make("dcsim/Nara-v0", requests=128)``), except
    ``render_mode`` (Gymnasium's: None, ``"ansi"`` or ``"rgb_array"``), which is not a
    setting.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, config: NaraEnvConfig | dict[str, Any] | None = None, *,
                 render_mode: str | None = None, **overrides):
        self.render_mode = checked_render_mode(render_mode, ENV_ID)
        if overrides:
            base = config.model_dump() if isinstance(config, NaraEnvConfig) else dict(
                config or {})
            config = {**base, **overrides}
        self.config = cfg = load_env_config(config)
        base_dir = Path(cfg.base_dir) if cfg.base_dir else None
        specs = cfg.topologies or [cfg.topology]
        #: the episode topologies (one unless ``topologies`` is given) and, per topology,
        #: the workload source and the observer
        self.topologies = [build_topology(t, base_dir) for t in specs]
        resources = {tuple(t.resources) for t in self.topologies}
        if len(resources) > 1:
            raise ConfigError(f"env.topologies: their server resources differ: "
                              f"{sorted(resources)}")
        self._sources = [build_source({**cfg.workload, "requests": cfg.requests}, t,
                                      base_dir) for t in self.topologies]
        self._observers = [Observer(t, cfg.holding_scale, features=cfg.features)
                           for t in self.topologies]
        layouts = [o.layout for o in self._observers]
        self.max_nodes = cfg.max_nodes or max(lay.n_nodes for lay in layouts)
        self.max_edges = (cfg.max_edges if cfg.max_edges is not None
                          else max(lay.n_edges for lay in layouts))
        self.max_servers = cfg.max_servers or max(lay.n_servers for lay in layouts)
        for name, key in (("max_nodes", "n_nodes"), ("max_edges", "n_edges"),
                          ("max_servers", "n_servers")):
            have = max(getattr(lay, key) for lay in layouts)
            if getattr(self, name) < have:
                raise ConfigError(f"env.{name}: {getattr(self, name)} is smaller than the "
                                  f"topology's {have}")
        if self.max_servers > self.max_nodes:
            raise ConfigError(f"env.max_servers {self.max_servers} exceeds max_nodes "
                              f"{self.max_nodes}")
        N, E, S = self.max_nodes, self.max_edges, self.max_servers
        self.observation_space = observation_space(
            N, E, S, len(self.topologies[0].resources), cfg.features)
        self.action_space = spaces.Discrete(S)
        # the padded static parts of each topology, reused by every observation
        self._statics = [padded_statics(lay, N, E, S) for lay in layouts]
        self.topology_index = 0
        self._use_topology(0)
        self.engine: Engine | None = None
        self.allocator: AgentAllocator | None = None
        self._arrivals: simpy.Process | None = None
        self._mask = np.zeros(S, dtype=bool)
        self._seen = 0

    def _use_topology(self, i: int) -> None:
        """Make topology ``i`` of :attr:`topologies` the current one."""
        self.topology_index = i
        self.topology = self.topologies[i]
        self.source = self._sources[i]
        self.observer = self._observers[i]
        self.layout = self.observer.layout

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if len(self.topologies) > 1:  # drawn before the workload's generator
            self._use_topology(int(self.np_random.integers(len(self.topologies))))
        if seed is not None:
            rng = np.random.default_rng(seed)
        else:
            rng = np.random.default_rng(self.np_random.integers(2**63))
        cfg = self.config
        alloc = AgentAllocator(AgentAllocator.Options(
            reservation=cfg.reservation, k_paths=cfg.k_paths, eligible=cfg.eligible,
            pair_paths=cfg.pair_paths))
        self.allocator = alloc
        self.engine = Engine(self.topology, self.source, alloc, rng,
                             EngineConfig(capacity=cfg.capacity,
                                          departures=cfg.departures))
        alloc.sim = self.engine.env
        self._arrivals = self.engine.start()
        self._seen = 0
        self._advance()
        if alloc.pending is None:
            raise DcsimError("NaraEnv: the episode ended before any server choice (every "
                             "request failed without one); check the workload and capacity")
        self._seen = len(alloc.results)
        return self._observe(), self._info(False)

    def step(self, action):
        alloc = self.allocator
        if alloc is None or alloc.pending is None:
            raise RuntimeError("NaraEnv.step() called without a pending decision; call "
                               "reset() first")
        part, event = alloc.pending
        alloc.pending = None
        a = int(action)
        invalid = not (0 <= a < self._mask.shape[0] and self._mask[a])
        # SimPy schedules an interrupt ahead of everything else at this instant (public
        # API; a plain event's succeed() would queue behind same-instant departures)
        self._arrivals.interrupt(None if invalid else a)
        self._advance()
        cfg = self.config
        new = alloc.results[self._seen:]
        self._seen = len(alloc.results)
        if new:
            reward = sum(cfg.reward_success if p is not None else cfg.reward_failure
                         for _, p in new)
        else:
            reward = cfg.reward_step
        terminated = alloc.pending is None
        obs = self._observe() if not terminated else self._last_obs
        info = self._info(invalid)
        return obs, float(reward), terminated, False, info

    def action_masks(self) -> np.ndarray:
        """The eligible servers (bool, max_servers) of the pending choice."""
        return self._mask.copy()

    def render_text(self) -> str:
        eng = self.engine
        if eng is None:
            return f"{ENV_ID}: no episode yet (call reset())"
        view, topo = eng.view, self.topology
        cap, free = view.capacity, view.free
        res = topo.resources
        util = "  ".join(f"{r} {_share(cap[:, j] - free[:, j], cap[:, j])}"
                         for j, r in enumerate(res))
        if view.link_capacity.shape[0]:
            util += f"  links {_share(view.link_capacity - view.link_free, view.link_capacity)}"
        decided = len(self.allocator.results)
        lines = [f"{ENV_ID}  t={view.now:g}  topology {self.topology_index} ({topo.name}, "
                 f"{topo.n_servers} servers)",
                 f"requests: {eng.received} of {self.config.requests} arrived, {decided} "
                 f"decided, {eng.accepted} placed",
                 f"utilisation: {util}"]
        part = self.partial
        if part is None:
            lines.append(f"pending: nothing (the episode is over after {decided} decisions)")
        else:
            req = part.request
            demand = " ".join(f"{r} {v:g}" for r, v in zip(res, req.demand, strict=True))
            left = " ".join(f"{r} {v:g}" for r, v in zip(res, part.remaining, strict=True))
            chosen = ", ".join(map(str, part.servers)) or "none yet"
            lines += [f"pending: request {req.id} (demand {demand}, bandwidth "
                      f"{req.bandwidth:.3g}, duration {req.duration:g})",
                      f"  servers chosen: {chosen}; remaining {left}; the mask offers "
                      f"{int(self._mask.sum())} of {self.max_servers} servers"]
        return "\n".join(lines) + "\n"

    def render_image(self) -> np.ndarray:
        S, R = self.max_servers, len(self.topologies[0].resources)
        used = np.full((S, R), np.nan)
        marks = np.zeros(S, dtype=np.int8)
        if self.engine is not None:
            view = self.engine.view
            n = view.capacity.shape[0]
            used[:n] = np.divide(view.capacity - view.free, view.capacity,
                                 out=np.zeros(view.capacity.shape), where=view.capacity > 0)
            part = self.partial
            if part is not None:
                marks[:len(self._mask)][self._mask] = 1
                marks[part.servers] = 2
        return bars_image(used, marks)

    # ------------------------------------------------------------------ helpers
    @property
    def partial(self) -> Partial | None:
        """The pending request's allocation in progress (None between episodes)."""
        p = self.allocator.pending if self.allocator is not None else None
        return p[0] if p is not None else None

    @property
    def view(self) -> StateView | None:
        return self.engine.view if self.engine is not None else None

    @property
    def results(self) -> list[tuple[Request, Placement | None]]:
        """This episode's decided requests so far: (request, placement or None)."""
        return self.allocator.results if self.allocator is not None else []

    def _advance(self) -> None:
        """Step the simulation until the agent must choose or the arrivals have ended."""
        sim = self.engine.env
        alloc = self.allocator
        arrivals = self._arrivals
        while alloc.pending is None and arrivals.is_alive:
            if sim.peek() == float("inf"):
                raise DcsimError(f"NaraEnv: request {self.engine.received} was held for "
                                 "capacity and never fitted")
            sim.step()
        if not arrivals.is_alive and not arrivals.ok:
            # SimPy turns an exception raised inside the arrival process (a Ctrl-C's
            # KeyboardInterrupt most often, or a bug) into a failed process that only
            # raises once the queue reaches it; the loop above stops first, and the episode
            # would end silently. Raise it here instead.
            arrivals.defused = True
            raise arrivals.value

    def _observe(self) -> dict[str, np.ndarray]:
        part = self.allocator.pending[0]
        o = self.observer.observe(part, self.engine.view)
        obs = padded_observation(o, self.layout, self.observation_space,
                                 self._statics[self.topology_index])
        self._mask = obs["action_mask"].astype(bool)
        self._last_obs = obs
        return obs

    def _info(self, invalid: bool) -> dict[str, Any]:
        eng = self.engine
        return {"received": eng.received, "accepted": eng.accepted,
                "decided": len(self.allocator.results), "invalid_action": invalid,
                "topology": self.topology_index}


def _share(used: np.ndarray, capacity: np.ndarray) -> str:
    """``used`` over ``capacity`` (summed) as a percentage, ``"-"`` with no capacity."""
    total = float(np.sum(capacity))
    return f"{100.0 * float(np.sum(used)) / total:.1f}%" if total > 0 else "-"


def observation_space(max_nodes: int, max_edges: int, max_servers: int, n_resources: int,
                      features: int) -> spaces.Dict:
    """The observation space of :class:`NaraEnv` padded to these sizes, for topologies of
    ``n_resources`` resources observed in feature version ``features``."""
    N, E, S = max_nodes, max_edges, max_servers
    F, Fe, G = feature_sizes(n_resources, features)
    big = np.float32(np.finfo(np.float32).max)
    return spaces.Dict({
        "nodes": spaces.Box(-big, big, (N, F), np.float32),
        "edges": spaces.Box(-big, big, (E, Fe), np.float32),
        "edge_index": spaces.Box(0, max(N - 1, 0), (2, E), np.int64),
        "globals": spaces.Box(-big, big, (G,), np.float32),
        "node_mask": spaces.MultiBinary(N),
        "edge_mask": spaces.MultiBinary(E),
        "action_mask": spaces.MultiBinary(S),
    })


def padded_statics(layout: GraphLayout, max_nodes: int, max_edges: int, max_servers: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The parts of a topology's observation that never change, padded to the environment's
    sizes: ``(edge_index, node_mask, edge_mask, padded)``; ``padded`` says whether any size
    exceeds the topology's own."""
    N, E, S = max_nodes, max_edges, max_servers
    edge_index = np.zeros((2, E), dtype=np.int64)
    edge_index[:, :layout.n_edges] = layout.edge_index
    node_mask = np.zeros(N, dtype=np.int8)
    node_mask[:layout.n_nodes] = 1
    edge_mask = np.zeros(E, dtype=np.int8)
    edge_mask[:layout.n_edges] = 1
    padded = (N, E, S) != (layout.n_nodes, layout.n_edges, layout.n_servers)
    return edge_index, node_mask, edge_mask, padded


def padded_observation(o: dict[str, np.ndarray], layout: GraphLayout,
                       space: spaces.Dict, statics=None) -> dict[str, np.ndarray]:
    """The environment's observation (its ``observation_space`` ``space``) of one server
    choice, from :meth:`Observer.observe`'s arrays ``o`` on a topology of layout ``layout``:
    padded, with the masks; ``action_mask`` is int8, 1 for the eligible servers. What
    :class:`NaraEnv` returns, and what :class:`dcsim.learn.nara.env_policy.NaraEnvPolicy`
    hands a policy trained on it. ``statics``: :func:`padded_statics`, when cached."""
    N, F = space["nodes"].shape
    E = space["edges"].shape[0]
    S = space["action_mask"].shape[0]
    edge_index, node_mask, edge_mask, padded = (
        statics if statics is not None else padded_statics(layout, N, E, S))
    mask = np.zeros(S, dtype=np.int8)
    mask[:layout.n_servers] = o["action_mask"]
    if padded:
        nodes = np.zeros((N, F), dtype=np.float32)
        nodes[:layout.n_nodes] = o["nodes"]
        edges = np.zeros(space["edges"].shape, dtype=np.float32)
        edges[:layout.n_edges] = o["edges"]
    else:
        nodes, edges = o["nodes"], o["edges"]
    return {"nodes": nodes, "edges": edges, "edge_index": edge_index.copy(),
            "globals": o["globals"], "node_mask": node_mask.copy(),
            "edge_mask": edge_mask.copy(), "action_mask": mask}


def register() -> None:
    """Register dcsim's Gymnasium environments (idempotent; see
    :func:`dcsim.environments.register_envs`)."""
    register_envs()


register()
