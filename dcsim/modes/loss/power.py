"""Power and energy of a loss-mode run: the ``power:`` section
(:class:`~dcsim.modes.loss.spec.PowerSpec`) built for a topology, and the :class:`PowerMeter`.

::

    power:
      server: {model: linear, idle_w: 100, peak_w: 250}   # any registered power model
    types:                 # optional: by the servers' `type` (a topology file's attribute)
      gpu: {model: table, points: [[0, 300], [0.5, 900], [1, 1200]]}
      resource: cpu          # the utilisation that drives the model (default: cpu, else
                             # the topology's first resource)
      idle_policy: off       # on (default): a server hosting nothing draws the model at 0;
                             # off: it is switched off and draws nothing
      power_on_j: 0          # energy of each switch-on of an idle-off server (joules)
      power_on_delay: 0      # time a switched-on server takes before it runs the request
      switch: {static_w: 150, port_w: 3}   # each switch: static + per port whose link is up
      time_unit_s: 1         # seconds per unit of simulated time (energy is in joules)
      carbon: {intensity: 300}             # gCO2/kWh, or {trace: intensity.csv}

**What is integrated.** A server's utilisation is the used share of its ``resource``; it
changes only when a request is placed on it or leaves it, and a server is down only
between a failure and its repair. Between two such events its draw is constant, so its
energy is the exact sum of draw × interval over those intervals (no sampling): the model's
watts at the utilisation, or nothing when the server is down (a failed component draws
nothing) or, under ``idle_policy: off``, hosts no request. A switch draws ``static_w`` plus
``port_w`` for each of its ports whose link is up. Energy counts over the measured window,
as the utilisation averages do: from the first measured arrival to the last arrival.

**Switching on takes time** (``power_on_delay``, in simulated time, with ``idle_policy:
off``). A request placed on a server that is off (hosts nothing) is accepted at once, as
loss mode accepts, and holds its resources from then, but runs only once the server is on:
it leaves ``power_on_delay`` later than its duration alone says, and the server draws its
model at the reserved utilisation meanwhile (plus ``power_on_j`` once). So a packing policy
that keeps servers off pays for it in longer holding times and the capacity they tie up. A
request placed on a server that is already on, or switching on, is not delayed. With a
delay the engine takes its general path (the fused one does not check it). Per-active-link
switch power (a port drawing more while its link carries traffic) is not modelled.

**How it is cheap.** The engine logs each change of a server (time, server, free amount of
the resource after it, +1/−1 request, +1/−1 failure) into one flat ``array('d')`` — one
``extend`` per placement and departure — and the meter folds the log into per-server
energies with numpy every so many events, and at every time-series sample (the folding
orders the events by server, keeps each server's state at the end, and integrates every
interval at once). Without ``power:`` none of this exists and the engine's path is
unchanged.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.config_files import resolve_path
from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError, PluginError
from dcsim.modes.loss.spec import PowerSpec
from dcsim.parquet_tables import read_parquet

#: joules in a kilowatt-hour (carbon intensities are per kWh)
J_PER_KWH = 3.6e6
#: events folded at once (each event is 5 floats of the log)
FOLD_EVENTS = 1 << 15
_ROW = 5  # time, server, free after, requests +-1, failures +-1


@dataclass
class PowerSetup:
    """A :class:`PowerSpec` built for one topology: the model instances and which server
    uses which, the resource column, and the carbon intensity (a constant, or a trace's
    breakpoints)."""

    spec: PowerSpec
    models: list[Any]  # dcsim.power.PowerModel instances
    model_of: np.ndarray  # per server, its model's index in models
    resource: int
    intensity: float | None = None
    trace_time: np.ndarray | None = None
    trace_value: np.ndarray | None = None


def build_power(spec: PowerSpec, topology, base_dir: str | None = None) -> PowerSetup:
    """Check ``spec`` against ``topology`` and build its models (``power.server`` for
    every server whose ``type`` is not under ``power.types``); a ConfigError names the
    field."""
    resources = list(topology.resources)
    name = spec.resource or ("cpu" if "cpu" in resources else resources[0])
    if name not in resources:
        raise ConfigError(f"power.resource: {name!r} is not a resource of the topology "
                          f"({', '.join(resources)})")
    types = [topology.graph.nodes[n].get("type") for n in topology.servers]
    named = sorted({str(t) for t in types if t is not None})
    unused = sorted(set(spec.types) - set(named))
    if unused:
        raise ConfigError(f"power.types.{unused[0]}: no server of the topology has this type"
                          f" (its types: {', '.join(named) or 'none'})")
    models, index = [], {}
    if spec.server is not None:
        index[None] = len(models)
        models.append(_model(spec.server, "power.server"))
    for t, m in spec.types.items():
        index[t] = len(models)
        models.append(_model(m, f"power.types.{t}"))
    model_of = np.empty(topology.n_servers, dtype=np.intp)
    for i, t in enumerate(types):
        key = str(t) if t is not None and str(t) in spec.types else None
        if key not in index:
            raise ConfigError(f"power.server: server {topology.servers[i]!r}"
                              + (f" (type {t!r})" if t is not None else "")
                              + " has no power model; give power.server (the default) or "
                              "its type under power.types")
        model_of[i] = index[key]
    setup = PowerSetup(spec, models, model_of, resources.index(name))
    if spec.carbon is not None:
        if spec.carbon.trace is not None:
            setup.trace_time, setup.trace_value = read_intensity(spec.carbon.trace, base_dir)
        else:
            setup.intensity = float(spec.carbon.intensity)
    return setup


def _model(raw: dict[str, Any], where: str):
    """The power model ``raw`` names, with its options; checked to give finite,
    non-negative watts for utilisations in [0, 1]."""
    from dcsim.plugins import get_plugin_class

    options = {k: v for k, v in raw.items() if k != "model"}
    try:
        cls = get_plugin_class(raw["model"], "power_model")
    except PluginError as e:
        raise ConfigError(f"{where}.model: {e}") from None
    model = cls(cls.parse_options(options, where=where))
    u = np.linspace(0.0, 1.0, 101)
    w = np.asarray(model.power(u), dtype=np.float64)
    if w.shape != u.shape:
        raise ConfigError(f"{where}.model: {model.name!r} returned {w.shape} watts for "
                          f"{u.shape} utilisations")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ConfigError(f"{where}.model: {model.name!r} gives negative or non-finite "
                          "watts between utilisation 0 and 1")
    return model


def read_intensity(path: str, base_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A carbon-intensity trace: columns ``time`` (simulated time, increasing) and
    ``intensity`` (gCO2/kWh, from that time until the next row's; the first row's value
    holds before it, the last row's after it)."""

    where = "power.carbon.trace"
    p = Path(resolve_path(path, base_dir))
    if not p.is_file():
        raise ConfigError(f"{where}: no such file {str(p)!r}")
    try:
        df = (read_parquet(p) if p.suffix.lower() in (".parquet", ".pq")
              else read_csv(p))
    except Exception as e:  # a file pandas cannot read
        raise ConfigError(f"{where}: cannot read {str(p)!r}: {e}") from None
    missing = [c for c in ("time", "intensity") if c not in df.columns]
    if missing:
        raise ConfigError(f"{where}: {str(p)!r} has no column {missing[0]!r} (it needs time "
                          "and intensity, in gCO2/kWh)")
    try:
        t = df["time"].to_numpy(dtype=np.float64)
        v = df["intensity"].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {str(p)!r}: time and intensity must be numbers") from None
    if t.size == 0:
        raise ConfigError(f"{where}: {str(p)!r} has no rows")
    if not (np.isfinite(t).all() and np.isfinite(v).all()) or (v < 0).any():
        raise ConfigError(f"{where}: {str(p)!r}: time and intensity must be finite and the "
                          "intensity non-negative")
    if (np.diff(t) <= 0).any():
        raise ConfigError(f"{where}: {str(p)!r}: time must increase from row to row")
    return t, v


def _cumulative(tt: np.ndarray, vv: np.ndarray):
    """``C(t)``, the integral of the piecewise-constant intensity from ``tt[0]`` (negative
    before it), as a vectorised function."""
    knots = np.concatenate(([0.0], np.cumsum(vv[:-1] * np.diff(tt))))

    def c(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        k = np.clip(np.searchsorted(tt, t, side="right") - 1, 0, tt.size - 1)
        return knots[k] + vv[k] * (t - tt[k])

    return c


def _stepwise(tt: np.ndarray, vv: np.ndarray):
    """The intensity at each time (the row in force then), as a vectorised function."""

    def i(t: np.ndarray) -> np.ndarray:
        return vv[np.clip(np.searchsorted(tt, t, side="right") - 1, 0, tt.size - 1)]

    return i


class PowerMeter:
    """Per-server energy of one loss-mode run, from the engine's log of server changes."""

    def __init__(self, setup: PowerSetup, topology, state):
        self.setup = setup
        self.models = setup.models
        self.model_of = setup.model_of
        self.r = setup.resource
        self.state = state
        n = topology.n_servers
        self.n_servers = n
        self.cap = np.ascontiguousarray(topology.server_capacity[:, self.r], dtype=np.float64)
        self.off = setup.spec.idle_policy == "off"
        self.power_on_j = float(setup.spec.power_on_j)
        #: the switch-on delay (simulated time; 0: none)
        self.delay = float(setup.spec.power_on_delay)
        self.unit = float(setup.spec.time_unit_s)
        # each server's state since its last logged change
        self.used = np.zeros(n)  # utilisation in [0, 1]
        self.hosted = np.zeros(n)  # requests placed on it
        self.down = np.zeros(n)  # failures in progress
        self.last = np.zeros(n)  # when it last changed
        self.energy = np.zeros(n)  # watts x time, over the window
        self.power_ons = 0
        self.carbon_area = 0.0  # watts x time x gCO2/kWh (with a trace)
        self._carbon = self._intensity = None
        if setup.trace_time is not None:
            self._carbon = _cumulative(setup.trace_time, setup.trace_value)
            self._intensity = _stepwise(setup.trace_time, setup.trace_value)
        self.power_on_intensity = 0.0  # the intensity at each switch-on, summed
        self.w0 = math.inf  # the measured window
        self.w1 = math.inf
        self.log = array("d")
        self._limit = FOLD_EVENTS * _ROW
        # switches: static + per port of an up link; a link's switch ends are its ports
        sw = setup.spec.switch
        servers = set(topology.servers)
        n_switches = topology.graph.number_of_nodes() - n
        self.link_ports = np.array([(a not in servers) + (b not in servers)
                                    for a, b in topology.links], dtype=np.float64)
        self.port_w = float(sw.port_w)
        self.net_w = n_switches * float(sw.static_w) + self.port_w * float(self.link_ports.sum())
        self._link_down = np.zeros(topology.n_links, dtype=np.int64)
        self._net_segments: list[tuple[float, float, float]] = []  # (from, to, watts)
        self._net_since = 0.0

    # -- the engine's hooks ---------------------------------------------------------------
    def server_ops(self, take_one, give_one, env):
        """The engine's hot-path ``take_one`` / ``give_one``, logging each change."""
        extend = self.log.extend
        free = self.state.free[:, self.r]
        fold_at = self._limit
        log = self.log

        def take(server: int, demand: list[float]) -> bool:
            if take_one(server, demand):
                extend((env.now, server, free.item(server), 1.0, 0.0))
                if len(log) >= fold_at:
                    self.fold()
                return True
            return False

        def give(server: int, amount: list[float]) -> None:
            give_one(server, amount)
            extend((env.now, server, free.item(server), -1.0, 0.0))

        return take, give

    def _servers(self, t: float, servers: np.ndarray, dn: float, dd: float) -> None:
        k = servers.size
        rows = np.empty((k, _ROW))
        rows[:, 0] = t
        rows[:, 1] = servers
        rows[:, 2] = self.state.free[servers, self.r]
        rows[:, 3] = dn
        rows[:, 4] = dd
        self.log.frombytes(rows.tobytes())
        if len(self.log) >= self._limit:
            self.fold()

    def switches_on(self, placement) -> bool:
        """Whether placing ``placement`` now switches on a server: one of its servers hosts
        no request and is up (call before :meth:`placed` logs it)."""
        self.fold()
        s = placement.servers
        return bool(np.any((self.hosted[s] == 0) & (self.down[s] == 0)))

    def placed(self, t: float, placement) -> None:
        """A request took ``placement`` at ``t`` (after the state changed)."""
        self._servers(t, placement.servers, 1.0, 0.0)

    def released(self, t: float, placement) -> None:
        """A request left ``placement`` at ``t`` (after the state changed)."""
        self._servers(t, placement.servers, -1.0, 0.0)

    def server_failed(self, t: float, server: int, sign: float) -> None:
        """Server ``server`` failed (``sign`` 1) or was repaired (−1) at ``t``."""
        self._servers(t, np.array([server]), 0.0, sign)

    def link_failed(self, t: float, link: int, sign: int) -> None:
        """Link ``link`` failed (``sign`` 1) or was repaired (−1): its ports draw nothing
        while it is down."""
        before = self._link_down[link]
        self._link_down[link] += sign
        if (before == 0) != (self._link_down[link] == 0):
            self._net_segments.append((self._net_since, t, self.net_w))
            self._net_since = t
            self.net_w += -sign * self.port_w * self.link_ports[link]

    def open(self, t: float) -> None:
        self.fold()
        self.w0 = t

    def close(self, t: float) -> None:
        self.fold()
        self.w1 = t

    # -- integration ----------------------------------------------------------------------
    def server_power(self, util: np.ndarray, hosted: np.ndarray, down: np.ndarray,
                     servers: np.ndarray | None = None) -> np.ndarray:
        """Watts of servers at ``util`` hosting ``hosted`` requests with ``down``
        failures: the model's, or 0 when down or (idle-off) hosting nothing. ``servers``
        says whose (their models) when there are several models."""
        if len(self.models) == 1:
            w = np.asarray(self.models[0].power(util), dtype=np.float64)
        else:
            which = self.model_of if servers is None else self.model_of[servers]
            w = np.empty(np.shape(util))
            for k, m in enumerate(self.models):
                sel = which == k
                if sel.any():
                    w[sel] = m.power(util[sel])
        on = down == 0
        if self.off:
            on &= hosted > 0
        return np.where(on, w, 0.0)

    def _util(self, servers: np.ndarray, free: np.ndarray) -> np.ndarray:
        cap = self.cap[servers]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(cap > 0, (cap - free) / cap, 0.0)
        return np.clip(u, 0.0, 1.0)

    def fold(self) -> None:
        """Integrate the logged changes into the per-server energies (numpy, all at once)."""
        if not self.log:
            return
        ev = np.frombuffer(self.log, dtype=np.float64).reshape(-1, _ROW).copy()
        del self.log[:]
        s_all = ev[:, 1].astype(np.intp)
        order = np.argsort(s_all, kind="stable")  # by server, in time order within one
        s = s_all[order]
        t, free, dn, dd = ev[order, 0], ev[order, 2], ev[order, 3], ev[order, 4]
        m = s.size
        first = np.empty(m, dtype=bool)
        first[0] = True
        np.not_equal(s[1:], s[:-1], out=first[1:])
        group = np.cumsum(first) - 1
        starts = np.flatnonzero(first)
        # counts after each event: the server's count before the fold + its running sum
        # (integers in floats: exact)
        cn, cd = np.cumsum(dn), np.cumsum(dd)
        n_after = self.hosted[s] + cn - (cn - dn)[starts][group]
        d_after = self.down[s] + cd - (cd - dd)[starts][group]
        u_after = self._util(s, free)
        # the state each event ends: the previous event's of the same server, or the
        # server's state before the fold
        prev_t = np.empty(m)
        prev_t[1:] = t[:-1]
        prev_u = np.empty(m)
        prev_u[1:] = u_after[:-1]
        prev_n = np.empty(m)
        prev_n[1:] = n_after[:-1]
        prev_d = np.empty(m)
        prev_d[1:] = d_after[:-1]
        sf = s[first]
        prev_t[first] = self.last[sf]
        prev_u[first] = self.used[sf]
        prev_n[first] = self.hosted[sf]
        prev_d[first] = self.down[sf]
        watts = self.server_power(prev_u, prev_n, prev_d, s)
        a = np.maximum(prev_t, self.w0)
        b = np.minimum(t, self.w1)
        dt = np.maximum(b - a, 0.0)
        self.energy += np.bincount(s, weights=watts * dt, minlength=self.n_servers)
        if self._carbon is not None:
            inside = dt > 0
            self.carbon_area += float(np.sum(watts[inside] * (
                self._carbon(b[inside]) - self._carbon(a[inside]))))
        if self.off:  # switch-ons in the window: from hosting nothing (and up) to hosting
            on = ((prev_n == 0) & (prev_d == 0) & (n_after > 0) & (d_after == 0)
                  & (t >= self.w0) & (t <= self.w1))
            self.power_ons += int(np.count_nonzero(on))
            if self._intensity is not None and on.any():
                self.power_on_intensity += float(self._intensity(t[on]).sum())
        last = np.empty(m, dtype=bool)
        last[-1] = True
        last[:-1] = first[1:]
        sl = s[last]
        self.last[sl] = t[last]
        self.used[sl] = u_after[last]
        self.hosted[sl] = n_after[last]
        self.down[sl] = d_after[last]

    def _server_tail(self, until: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each server's (watts now, from, to) for its interval since its last change,
        clipped to the window and ``until``."""
        watts = self.server_power(self.used, self.hosted, self.down)
        a = np.maximum(self.last, self.w0)
        b = np.full(self.n_servers, min(until, self.w1))
        return watts, a, b

    def server_energy(self, until: float) -> np.ndarray:
        """Each server's energy over the window up to ``until`` (watts × time units; the
        power-on energy not included)."""
        self.fold()
        watts, a, b = self._server_tail(until)
        return self.energy + watts * np.maximum(b - a, 0.0)

    def _network(self, until: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        segs = [*self._net_segments, (self._net_since, until, self.net_w)]
        arr = np.array(segs, dtype=np.float64).reshape(-1, 3)
        a = np.maximum(arr[:, 0], self.w0)
        b = np.minimum(arr[:, 1], min(until, self.w1))
        return arr[:, 2], a, b

    def instant(self) -> dict[str, float]:
        """Watts drawn right now (a time-series sample)."""
        self.fold()
        servers = float(self.server_power(self.used, self.hosted, self.down).sum())
        return {"power_w": servers + self.net_w, "power_servers_w": servers,
                "power_network_w": self.net_w}

    def summary(self, end: float) -> dict[str, Any]:
        """Energy, mean power (and carbon) over the measured window; ``end`` is the
        simulated time now."""
        span = self.w1 - self.w0
        if not (math.isfinite(span) and span > 0):
            nan = math.nan
            out = {"energy_j": nan, "energy_servers_j": nan, "energy_network_j": nan,
                   "mean_power_w": nan, "mean_power_servers_w": nan,
                   "mean_power_network_w": nan, "power_ons": self.power_ons}
            if self.setup.spec.carbon is not None:
                out["carbon_g"] = nan
            return out
        servers = float(self.server_energy(end).sum())
        nw, na, nb = self._network(end)
        ndt = np.maximum(nb - na, 0.0)
        network = float(np.sum(nw * ndt))
        on_j = self.power_ons * self.power_on_j
        e_servers = servers * self.unit + on_j
        e_network = network * self.unit
        out = {
            "energy_j": e_servers + e_network,
            "energy_servers_j": e_servers,
            "energy_network_j": e_network,
            "mean_power_w": (e_servers + e_network) / (span * self.unit),
            "mean_power_servers_w": e_servers / (span * self.unit),
            "mean_power_network_w": e_network / (span * self.unit),
            "power_ons": self.power_ons,
        }
        if self.setup.intensity is not None:
            out["carbon_g"] = out["energy_j"] / J_PER_KWH * self.setup.intensity
        elif self._carbon is not None:
            c = self._carbon
            watts, a, b = self._server_tail(end)
            inside = b > a
            area = self.carbon_area + float(np.sum(watts[inside] * (c(b[inside])
                                                                    - c(a[inside]))))
            inside = nb > na
            area += float(np.sum(nw[inside] * (c(nb[inside]) - c(na[inside]))))
            # each switch-on's energy at the intensity of its moment
            out["carbon_g"] = (area * self.unit + self.power_on_j * self.power_on_intensity
                               ) / J_PER_KWH
        return out
