"""The Nara allocation step: a request spread over servers chosen one at a time.

Nara (Shabka et al. 2021, 2023) and its baselines all build a placement the same way, and
differ only in *which server comes next*. :func:`allocate_multi` is that shared step;
:class:`MultiServerAllocator` wires it to an allocator whose :meth:`~MultiServerAllocator.choose`
names the next server. Third-party allocators subclass it, or call :func:`allocate_multi`
with any chooser; :func:`allocate_multi_steps` is the same step as a generator that yields
each choice to its caller (how :class:`dcsim.learn.nara.env.NaraEnv` lets an agent choose).

The step, for a request with demand ``d`` and per-flow bandwidth ``B``:

1. The chooser gets the partial allocation (:class:`Partial`: remaining demand, servers so
   far, the free bandwidth the path check sees) and returns a server, or ``None``.
2. The server gives ``min(free, remaining)`` of every resource.
3. For the new server and *every* server already holding part of the request, the first of
   the ``k`` shortest simple paths (by hop count unless the allocator ranks paths otherwise)
   whose links all have enough free bandwidth is accepted; if no candidate has, the whole
   request fails.
4. Repeat until nothing remains.

Failure returns ``None``. The step never mutates the state: it returns a :class:`Placement`
that the engine validates and reserves, so a failed request leaves the state exactly as it
was (the papers' "de-allocate everything and drop the request").

Servers a chooser may pick (:meth:`Partial.eligible`): not already chosen, and with some free
amount of a resource the request still needs (a server that would give nothing is never
offered). When no such server exists the request **fails**: the cluster cannot hold the
rest. (The authors' environment instead fast-forwarded time until it fitted; that is a
property of the arrival process, not of the allocation step.) A request whose demand is all
zero still needs one server: every server is eligible for its first choice. With
``eligible="any_free"`` (the Nara authors' action mask, ``packing_env.py``) a server with a
free amount of *any* resource may be chosen; one that gives nothing the request still needs
joins it with a zero share and still needs its paths. ``pair_paths`` (``all`` by default)
can exempt pairs where neither server gives cpu from step 3, as the authors' 2022 code
does (:data:`PairPaths`).

Two reservation semantics (``reservation``):

* ``union`` (2021 paper): ``B`` is reserved **once per link** in the union of the accepted
  paths, when the request completes. A path passes when each of its links either already
  lies on an accepted path of this request (already paid) or has ``free >= B``.
* ``per_pair_channel`` (2023 paper, one channel per link per server pair): every accepted
  pair reserves ``B`` on each link of its path **immediately**, so later pairs of the same
  request see the reduced free bandwidth; a link on ``p`` accepted paths carries ``p·B``.

A zero-bandwidth request, or a topology without links (``flat``), needs no paths.

Under the engine's ``departures: after_first_step`` (the Nara authors' clock) the view's
``step_boundaries`` is set: :meth:`MultiServerAllocator.allocate` then returns a generator
(a stepwise decision, :func:`allocate_multi_stepwise`) that yields
:data:`~dcsim.allocators.base.FIRST_STEP` once, after the first server that leaves
something to place; the engine releases the requests ending at this instant there and
resumes the step, whose later choices see the freed resources
(:mod:`dcsim.modes.loss.engine`). The step itself releases nothing.
"""

from __future__ import annotations

import weakref
from abc import abstractmethod
from collections.abc import Callable, Generator
from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt

from dcsim.allocators.base import FIRST_STEP, Allocator, Choice, StepBoundary
from dcsim.allocators.multi.paths import (  # noqa: F401 (PathWeight, link_weights: re-exported)
    PathWeight,
    link_weight,
    link_weights,
    weighted_k_paths,
)
from dcsim.errors import PluginError
from dcsim.kernels import kernels_on
from dcsim.model import Placement, Request, StateView, Topology
from dcsim.model.paths import PathService
from dcsim.model.state import EPS

Reservation = Literal["union", "per_pair_channel"]
#: Which servers a chooser may pick: ``needed`` (some free amount of a resource the request
#: still needs) or ``any_free`` (some free amount of any resource: the Nara authors' mask).
Eligibility = Literal["needed", "any_free"]
#: Which server pairs of a request need a path: ``all``; ``cpu`` (a pair where neither server
#: gives cpu needs none: the Nara authors' 2022 "memory-memory comms" change, as meant);
#: ``authors_sticky`` (their loop, whose flag is never reset: once the new server gives no
#: cpu and one earlier server gave none, no later earlier server is checked either).
PairPaths = Literal["all", "cpu", "authors_sticky"]

_PATHS: weakref.WeakKeyDictionary[Topology, PathService] = weakref.WeakKeyDictionary()


def path_service(topology: Topology) -> PathService:
    """The :class:`PathService` of ``topology``, shared by every allocator of the process."""
    ps = _PATHS.get(topology)
    if ps is None:
        ps = _PATHS[topology] = PathService(topology)
    return ps


class PartialBuffers:
    """A :class:`Partial`'s cluster-sized arrays (``chosen``, ``reserved``), kept zeroed
    between one allocator's requests.

    A request sets a few entries of them (its servers, its paths' links); zeroing those
    again when it ends (:meth:`Partial.release`) is cheaper than a fresh array of the whole
    cluster per request, which would grow the cost of a decision with the cluster. A
    Partial that is never released (its caller stopped early, or raised) keeps its arrays,
    and the next one takes fresh ones.
    """

    __slots__ = ("_chosen", "_reserved")

    def __init__(self):
        self._chosen: np.ndarray | None = None
        self._reserved: np.ndarray | None = None

    def chosen(self, n: int) -> np.ndarray:
        """An all-False boolean array of ``n``, taken from the pool where it has one."""
        a = self._chosen
        if a is None or a.shape[0] != n:
            return np.zeros(n, dtype=bool)
        self._chosen = None
        return a

    def reserved(self, n: int) -> np.ndarray:
        """An all-zero float64 array of ``n``, taken from the pool where it has one."""
        a = self._reserved
        if a is None or a.shape[0] != n:
            return np.zeros(n, dtype=np.float64)
        self._reserved = None
        return a

    def give_back(self, chosen: np.ndarray, reserved: np.ndarray | None) -> None:
        """Return arrays (zeroed again by the caller) to the pool."""
        self._chosen = chosen
        if reserved is not None:
            self._reserved = reserved


class Partial:
    """A request's allocation in progress, as a chooser sees it.

    ``remaining`` is the demand still to place; ``servers`` and ``amounts`` what the chosen
    servers give, in choice order; ``chosen`` the same as a boolean mask over servers.
    ``link_free`` is the free bandwidth the path check compares against ``bandwidth``: the
    view's under ``union``, the view's minus this request's earlier pairs under
    ``per_pair_channel``. ``reserved`` is the bandwidth this request will take per link
    (``None`` when it needs no paths; read-only to choosers, charged by :meth:`accept_path`).
    ``scratch`` is a per-request dict for choosers that
    keep state between their calls (e.g. a BFS frontier). ``buffers``: where ``chosen`` and
    ``reserved`` come from and go back to (:meth:`release`); None: fresh arrays.
    """

    __slots__ = ("request", "view", "remaining", "servers", "amounts", "chosen", "bandwidth",
                 "reservation", "link_free", "reserved", "scratch", "_tol", "_eligible",
                 "eligibility", "_done_tol", "_accepted", "_buffers")

    def __init__(self, request: Request, view: StateView, reservation: Reservation,
                 needs_paths: bool, eligibility: Eligibility = "needed",
                 buffers: PartialBuffers | None = None):
        self.request = request
        self.view = view
        self.remaining = np.array(request.demand, dtype=np.float64)
        self.servers: list[int] = []
        self.amounts: list[np.ndarray] = []
        self._buffers = buffers
        n = view.free.shape[0]
        self.chosen = np.zeros(n, dtype=bool) if buffers is None else buffers.chosen(n)
        self.bandwidth = float(request.bandwidth)
        self.reservation = reservation
        self.link_free: np.ndarray = view.link_free
        self.reserved: np.ndarray | None = None
        if needs_paths:
            m = view.link_free.shape[0]
            self.reserved = np.zeros(m, dtype=np.float64) if buffers is None else \
                buffers.reserved(m)
            if reservation == "per_pair_channel":
                self.link_free = np.array(view.link_free, dtype=np.float64)
        self.scratch: dict = {}
        self._tol = view.server_tol
        self._eligible: np.ndarray | None = None
        self.eligibility = eligibility
        self._done_tol = EPS * np.maximum(request.demand, 1.0)
        self._accepted: list[np.ndarray] = []  # the links accept_path charged

    @property
    def done(self) -> bool:
        """Nothing left to place (and at least one server chosen)."""
        return bool(self.servers) and not np.any(self.remaining > self._done_tol)

    @property
    def previous(self) -> int:
        """The most recently chosen server, -1 before the first choice."""
        return self.servers[-1] if self.servers else -1

    def anchor(self, which: str, carried: int = -1) -> int:
        """The server a locality term is measured from, -1 for none: the request's
        ``first`` chosen server, the ``previous`` one, ``carried`` (given by the caller,
        e.g. one chosen for an earlier request) or ``none``."""
        if which == "first":
            return self.servers[0] if self.servers else -1
        if which == "previous":
            return self.previous
        return carried if which == "carried" else -1

    def gives(self) -> np.ndarray:
        """Per server and resource, what it would give now: ``min(free, remaining)``."""
        return np.minimum(self.view.free, self.remaining)

    def eligible_at(self, idx: np.ndarray) -> np.ndarray:
        """:meth:`eligible` at the servers ``idx`` only (a chooser that searches a rack
        before the cluster computes no more than it needs; the same test)."""
        if self._eligible is not None:
            return self._eligible[idx]
        if not self.servers and not np.any(self.remaining > 0):
            return np.ones(idx.shape[0], dtype=bool)
        free = self.view.free[idx]
        if self.eligibility != "any_free":
            free = np.minimum(free, self.remaining)
        return np.any(free > self._tol[idx], axis=1) & ~self.chosen[idx]

    def is_eligible(self, server: int) -> bool:
        """:meth:`eligible` of one server (the same test on its row)."""
        if self._eligible is not None:
            return bool(self._eligible[server])
        if not self.servers and not np.any(self.remaining > 0):
            return True
        free = self.view.free[server]
        if self.eligibility != "any_free":
            free = np.minimum(free, self.remaining)
        return bool(np.any(free > self._tol[server])) and not self.chosen[server]

    @property
    def eligible_known(self) -> bool:
        """Whether :meth:`eligible` has been computed since the last choice (then
        :meth:`eligible_at` and :meth:`is_eligible` read it rather than compute)."""
        return self._eligible is not None

    def eligible(self) -> np.ndarray:
        """Servers a chooser may pick: unchosen, giving something the request still needs
        (``eligibility="any_free"``: with a free amount of any resource).

        Before the first choice of an all-zero demand, every server. Computed once per
        choice (the view changes only between choices); read-only.
        """
        if self._eligible is None:
            if not self.servers and not np.any(self.remaining > 0):
                mask = np.ones(self.chosen.shape[0], dtype=bool)
            elif self.eligibility == "any_free":
                mask = np.any(self.view.free > self._tol, axis=1) & ~self.chosen
            else:
                mask = np.any(self.gives() > self._tol, axis=1) & ~self.chosen
            mask.flags.writeable = False
            self._eligible = mask
        return self._eligible

    def path_ok(self, links: np.ndarray) -> bool:
        """Whether every link of a path has enough free bandwidth for this request now."""
        if not links.size:
            return True
        free = self.link_free[links]
        ok = free >= self.bandwidth - 0.5 * EPS * np.maximum(self.view.link_capacity[links], 1)
        if self.reservation == "union":
            ok |= self.reserved[links] > 0
        return bool(ok.all())

    def accept_path(self, links: np.ndarray) -> None:
        """Charge an accepted path according to the reservation semantics."""
        self._accepted.append(links)
        if self.reservation == "union":
            self.reserved[links] = self.bandwidth
        else:
            self.reserved[links] += self.bandwidth
            self.link_free[links] -= self.bandwidth

    def add(self, server: int) -> None:
        """Take ``min(free, remaining)`` from ``server`` (paths already accepted)."""
        take = np.minimum(self.view.free[server], self.remaining)
        np.maximum(take, 0.0, out=take)
        self.servers.append(server)
        self.amounts.append(take)
        self.remaining = self.remaining - take
        self.chosen[server] = True
        self._eligible = None

    def release(self) -> None:
        """Zero the entries of ``chosen`` and ``reserved`` this request set (its servers,
        its accepted paths' links: the only ones it writes) and return the arrays to the
        :class:`PartialBuffers` they came from; the Partial must not be used after. Does
        nothing for a Partial made without buffers, or already released."""
        buffers = self._buffers
        if buffers is None:
            return
        self._buffers = None
        self.chosen[self.servers] = False
        if self.reserved is not None:
            for links in self._accepted:
                self.reserved[links] = 0.0
        buffers.give_back(self.chosen, self.reserved)

    def placement(self) -> Placement:
        """The finished allocation; the amounts sum to the request's demand."""
        amounts = np.array(self.amounts, dtype=np.float64)
        # absorb the float residue of repeated subtraction into the last server's share
        amounts[-1] += self.request.demand - amounts.sum(axis=0)
        np.maximum(amounts[-1], 0.0, out=amounts[-1])
        servers = np.array(self.servers, dtype=np.int64)
        if self.reserved is None:
            return Placement(servers, amounts)
        # the links with bandwidth reserved, ascending: only accepted paths' links can be
        links = np.unique(np.concatenate(self._accepted)) if self._accepted else _NO_LINKS
        links = links[self.reserved[links] > 0]
        return Placement(servers, amounts, links, self.reserved[links])


_NO_LINKS = np.zeros(0, dtype=np.int64)

#: Chooser: the next server for a partial allocation, or None when none will do.
Chooser = Callable[[Partial, StateView], "int | None"]
#: Path finder: candidate paths (link-index arrays, best first) between servers a and b.
PathFinder = Callable[[int, int, Partial], list[np.ndarray]]


def allocate_multi_steps(
    request: Request,
    view: StateView,
    find_paths: PathFinder,
    reservation: Reservation = "union",
    who: str = "allocator",
    eligibility: Eligibility = "needed",
    pair_paths: PairPaths = "all",
    buffers: PartialBuffers | None = None,
    step_boundaries: bool = False,
) -> Generator[Partial | StepBoundary, int | None, Placement | None]:
    """The Nara step (module docstring) as a generator, for callers that choose outside it.

    Yields the :class:`Partial` whenever the next server is needed and receives it via
    ``send()`` (``None`` fails the request); returns (``StopIteration.value``) the
    placement, or ``None`` when the request failed. :func:`allocate_multi` drives it with a
    chooser; a learning environment drives it with an agent's actions. ``buffers``: the
    Partial's arrays come from there (the caller releases it when done with it).

    ``step_boundaries`` (pass the engine's ``view.step_boundaries``): once, after the first
    server that leaves something to place, yield :data:`~dcsim.allocators.base.FIRST_STEP`
    instead of the Partial and resume on ``send(None)``; the caller passes the marker on to
    the engine, which releases the requests ending now before resuming it.
    """
    needs_paths = request.bandwidth > 0 and view.link_free.shape[0] > 0
    part = Partial(request, view, reservation, needs_paths, eligibility, buffers)
    resources = view.topology.resources
    cpu = resources.index("cpu") if "cpu" in resources else 0
    boundary = step_boundaries
    while not part.done:
        s = yield part
        if s is None:
            return None
        s = int(s)
        if not (0 <= s < part.chosen.shape[0]) or not part.is_eligible(s):
            raise PluginError(f"allocator {who!r} chose server {s}, which is not eligible "
                              "(already chosen, out of range, or has nothing still needed)")
        if needs_paths:
            no_cpu = pair_paths != "all" and not min(view.free[s, cpu], part.remaining[cpu]) > 0
            skip = False
            for t, given in zip(part.servers, part.amounts, strict=True):
                if no_cpu:
                    if pair_paths == "cpu":
                        skip = not given[cpu] > 0
                    elif not given[cpu] > 0:
                        skip = True  # authors_sticky: stays set for every later t
                    if skip:
                        continue
                for links in find_paths(s, t, part):
                    if part.path_ok(links):
                        part.accept_path(links)
                        break
                else:
                    return None
        part.add(s)
        if boundary and not part.done:
            # departures: after_first_step (the Nara authors' clock): the engine releases the
            # requests ending now after this request's first partial step
            yield FIRST_STEP
            boundary = False
            if part.reservation == "per_pair_channel" and part.reserved is not None:
                part.link_free = view.link_free - part.reserved
    return part.placement()


def allocate_multi(
    request: Request,
    view: StateView,
    choose: Chooser,
    find_paths: PathFinder,
    reservation: Reservation = "union",
    who: str = "allocator",
    eligibility: Eligibility = "needed",
    pair_paths: PairPaths = "all",
    buffers: PartialBuffers | None = None,
) -> Placement | None:
    """Run the Nara step (module docstring) with ``choose`` and ``find_paths``.

    Returns the placement, or ``None`` when the chooser finds no server or some server pair
    has no usable path. ``who`` names the allocator when the chooser misbehaves.
    ``buffers``: the :class:`Partial`'s arrays come from there and go back when the request
    is decided (not when the chooser or a path finder raised).
    """
    steps = allocate_multi_steps(request, view, find_paths, reservation, who, eligibility,
                                 pair_paths, buffers)
    part = next(steps)  # the step always asks for a first server
    send = steps.send
    try:
        while True:
            part = send(choose(part, view))
    except StopIteration as stop:
        part.release()
        return stop.value


def allocate_multi_stepwise(
    request: Request,
    view: StateView,
    choose: Chooser,
    find_paths: PathFinder,
    reservation: Reservation = "union",
    who: str = "allocator",
    eligibility: Eligibility = "needed",
    pair_paths: PairPaths = "all",
    buffers: PartialBuffers | None = None,
) -> Generator[StepBoundary, None, Placement | None]:
    """:func:`allocate_multi` as a stepwise decision, for an allocator's ``allocate()``
    under the engine's ``view.step_boundaries``: a generator that yields
    :data:`~dcsim.allocators.base.FIRST_STEP` after the first server that leaves something
    to place (the engine releases the requests ending now there) and returns the placement
    or ``None``; the same choices, paths and result as :func:`allocate_multi` otherwise.
    """
    steps = allocate_multi_steps(request, view, find_paths, reservation, who, eligibility,
                                 pair_paths, buffers, step_boundaries=True)
    part = first = next(steps)  # the step always asks for a first server
    send = steps.send
    try:
        while True:
            if part is FIRST_STEP:
                yield FIRST_STEP  # the engine acts here
                part = send(None)
            else:
                part = send(choose(part, view))
    except StopIteration as stop:
        first.release()
        return stop.value


class MultiServerAllocator(Allocator):
    """Base of allocators that spread a request over servers chosen one at a time.

    Subclasses implement :meth:`choose`; :meth:`paths` ranks candidate paths (hop count by
    default, or by ``path_weight`` where a subclass declares that option). :meth:`allocate`
    decides in one call, or, while the engine sets ``view.step_boundaries``
    (``departures: after_first_step``), returns the stepwise decision of
    :func:`allocate_multi_stepwise`.
    """

    class Options(Allocator.Options):
        reservation: Reservation = Field(
            "union", description="union: B once per link of the request (2021); "
            "per_pair_channel: B per link per server pair, at once (2023)")
        k_paths: PositiveInt = Field(3, description="candidate shortest paths per server pair")
        eligible: Eligibility = Field(
            "needed", description="servers that may be chosen: needed: with a free amount of "
            "something the request still needs; any_free: with a free amount of anything "
            "(the Nara authors' action mask; a server giving nothing still needs paths)")
        pair_paths: PairPaths = Field(
            "all", description="server pairs that need a path: all; cpu: not a pair where "
            "neither server gives cpu (the Nara authors' 2022 code, as meant); authors_sticky: "
            "their loop, which skips every later pair once one is skipped")

    def setup(self, view: StateView) -> None:
        self.path_service = path_service(view.topology)
        #: the compiled weighted search (numba, DCSIM_KERNELS): the same paths
        self.paths_kernel = kernels_on()

    @abstractmethod
    def choose(self, partial: Partial, view: StateView) -> int | None:
        """The next server for ``partial`` (one of ``partial.eligible()``), or None to fail."""

    def paths(self, a: int, b: int, partial: Partial) -> list[np.ndarray]:
        """Candidate paths between servers ``a`` and ``b``, best first."""
        kind = getattr(self.options, "path_weight", "hops")
        if kind == "hops":
            return self.path_service.k_paths(a, b, self.options.k_paths)
        if self.paths_kernel:  # every link's weight at once: the same floats
            w = link_weights(kind, partial.link_free, partial.view.link_capacity)
            return weighted_k_paths(self.path_service, a, b, self.options.k_paths, w,
                                    kernel=True)
        w = link_weight(kind, partial.link_free, partial.view.link_capacity)
        return weighted_k_paths(self.path_service, a, b, self.options.k_paths, w)

    def allocate(self, request: Request, view: StateView
                 ) -> Choice | Generator[StepBoundary, None, Placement | None]:
        if not hasattr(self, "path_service"):
            self.setup(view)
        o = self.options
        who = getattr(self, "_who", None)
        if who is None or who[0] is not o:  # the label, computed once per options
            who = self._who = (o, self.label)
        buffers = getattr(self, "_partial_buffers", None)
        if buffers is None:
            buffers = self._partial_buffers = PartialBuffers()
        if view.step_boundaries:  # departures: after_first_step: a stepwise decision
            return allocate_multi_stepwise(request, view, self.choose, self.paths,
                                           o.reservation, who[1], o.eligible, o.pair_paths,
                                           buffers)
        return allocate_multi(request, view, self.choose, self.paths, o.reservation, who[1],
                              o.eligible, o.pair_paths, buffers)
