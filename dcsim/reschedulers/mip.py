"""VMR²L's MIP baseline (Appendix A.1), ``mip``: the fragment-rate optimum under the MNL,
solved with HiGHS through ``scipy.optimize.milp``."""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import Field
from scipy.optimize import Bounds, LinearConstraint, milp

from dcsim.reschedulers.base import Plan, Rescheduler, sequence_moves
from dcsim.reschedulers.heuristics import AlphaVBPP, Greedy, X, vm_numa_load
from dcsim.vm.model import BOTH, MappingState, Migration

#: the weight of a tie-breaker ε·(VMs moved) in the objective is _EPS_SCALE / (MNL + 1). It is
#: 0: with ε = 0.01/(MNL + 1) HiGHS needed up to 13 s (a 51-node search) where the plain
#: objective, integral in steps of 16 cores, was solved at the root node in at most 4.1 s
#: (50 production-like mappings, MNL 10..50); pointless moves are removed afterwards instead
#: (see MIP). The bound arithmetic still accounts for any ε > 0.
_EPS_SCALE = 0.0


# -- MIP -------------------------------------------------------------------------------------
class MIP(Rescheduler):
    """The paper's MIP (Appendix A.1, eqs. 1–7) solved by HiGHS (``scipy.optimize.milp``),
    warm-started from the heuristics and stopped by a deterministic work limit.

    Objective (eq. 1): minimise Σ_ij (U_ij − load_ij − 16·y_ij) with integer y_ij ≥ 0 and
    load_ij + 16·y_ij ≤ U_ij (eq. 2): at the optimum y_ij = ⌊free_ij / 16⌋, so the objective
    is the fragment. Since Σ load is fixed, we minimise −16·Σ y and add the constant back.
    Memory (eq. 3), every VM placed once (eq. 4) on both NUMAs of one host if double-NUMA
    (eq. 6, by using one variable per host for such VMs), at most MNL VMs off their original
    (host, NUMA) (eq. 5). Reformulations (documented differences):

    * ``formulation="aggregated"`` (default): VMs of the same shape (single/double, cpu,
      memory) are interchangeable for every constraint and for FR, so instead of one binary
      per VM × host × NUMA the variables count, per shape and (host, NUMA), the VMs that
      leave (``o``, at most the migratable ones there) and arrive (``p``, at most as many
      as fit in what the (host, NUMA) has free once its migratable VMs are gone). Then
      Σ o = Σ p per shape and Σ o ≤ MNL is eq. 5. Same optimum, ~200× fewer variables on
      280 hosts (≈ 6 k instead of ≈ 1 M). Which VM of a shape leaves a slot is chosen in
      input order.
    * Same-host moves are not migrations in our model (a VM cannot move to the host it is
      on), whereas eq. 5 would let a single-NUMA VM change NUMA within its host at the cost
      of one migration. ``per_vm`` drops those variables; ``aggregated`` adds, per shape and
      host, (VMs leaving) + (VMs arriving) ≤ (VMs of that shape moving in total), the
      condition under which leavers can be matched to arrivals on *other* hosts (Hall's
      condition); the matching is then built largest-first.
    * ``formulation="per_vm"`` is eqs. 1–7 as written (one binary per VM and option), for
      small instances and for checking the aggregation (≈ 1.2 GB on 280 hosts).
    * No tie-breaker in the objective (the previous ε·(VMs moved) term made HiGHS up to 3×
      slower on 280 hosts, see ``_EPS_SCALE``): the objective is integral in 16-core steps
      and HiGHS stops as soon as the *FR* is proven optimal (its relative gap is set below
      one such step; ``mip_rel_gap`` overrides it). Pointless moves are removed from the
      solution instead: VMs of one shape leaving and arriving at the same (host, NUMA)
      cancel, then every planned move whose undoing keeps the end state valid and its
      fragment no higher is dropped (in input order, until none is).

    The solution is an end state; :func:`sequence_moves` orders its moves so that each step
    is valid, with a detour through a third host to break a cycle (one extra step). If the
    moves do not fit in MNL steps, the MIP is solved again with MNL lowered by the number of
    moves left over, at most ``max_solves`` solves in all; the best sequence found is kept.

    **Anytime.** With ``warm_start`` (default) ``greedy`` and ``alpha_vbpp`` (default
    options) run first on the same mapping and MNL, and the answer is the best of their
    plans, the MIP's sequenced plan and the unchanged mapping: lowest fragment, then fewest
    steps, then MIP, greedy, alpha_vbpp in that order. So whatever the limit, the MIP is
    never worse than its warm start. ``info["source"]`` says which plan won (``"mip"``,
    ``"greedy"``, ``"alpha_vbpp"`` or ``"none"``); ``info`` also holds each plan's FR
    (``mip_fr`` is None when HiGHS found no feasible point), the solves (``attempts``) and
    HiGHS's branch-and-bound nodes over them (``nodes``).

    * Symmetry: hosts with the same free cpu and memory per NUMA and the same VMs (shape,
      NUMA, migratable) are interchangeable (about 110 of 279 hosts, in about 30 groups, on
      the production-like mappings), so ``aggregated`` orders each group by activity: the
      VMs leaving or arriving at a host (Σ o + p) do not increase along the group, in host
      order. Any solution can be permuted to meet this, so the optimum is unchanged; it kept
      the medium mappings' rare branch-and-bound searches (up to 300 nodes, 11 s) at the
      root node (at most 3.4 s over 25 mappings × MNL; the production-like ones unchanged).

    HiGHS runs without its presolve on the aggregated form (measured faster on the
    production-like mappings, see ``_solve``).

    **Limits.** ``node_limit`` (default 1000) caps HiGHS's branch-and-bound nodes per solve,
    and ``max_solves`` the solves: work counted in nodes, not seconds, so the same mapping
    and options give the same plan whatever the machine's load (HiGHS's MIP search is
    deterministic; the root node, where the 280-host instances are usually solved, always
    runs to its end). Without ``time_limit`` the MIP never reads the clock. ``time_limit``
    (default None) adds a wall-clock limit in seconds over all the solves, for latency
    studies: the plan then depends on how fast the machine runs it, i.e. on its load.

    ``bound`` is HiGHS's dual bound turned into FR units (the ε term removed and the
    fragment rounded up to the 16-core lattice it lives on): no end state with at most MNL
    VMs on other hosts (and none on the other NUMA of its own host) has a lower FR. It is
    the bound of the first solve (at the full MNL), lowered to the returned plan's FR in
    the rare case that a heuristic's plan (which may move a VM twice) ends below it.
    ``status``: ``optimal`` (the returned FR equals the bound: proven optimal; the
    fewer-moves tie-break may not be), ``node_limit`` or ``time_limit`` (the limit stopped
    the first solve before the FR was proven optimal), ``no_solution`` (HiGHS found no
    feasible point within the limit: the plan is the warm start's, or no migrations), with
    ``+dropped`` appended when the returned FR is above the bound and some of the MIP's
    planned moves could not be sequenced within MNL steps (``info["dropped"]``): then
    ``optimal+dropped`` means HiGHS proved the end state optimal but no plan found reaches
    it in MNL steps.
    """

    name = "mip"
    description = ("the paper's MIP (A.1) solved with HiGHS, warm-started from greedy and "
                   "alpha_vbpp, within a node limit")

    class Options(Rescheduler.Options):
        node_limit: int | None = Field(1000, ge=1, description="HiGHS branch-and-bound "
                                       "nodes per solve: a deterministic work limit (None: "
                                       "no limit)")
        max_solves: int = Field(3, ge=1, description="solves in all (re-solves at a lower "
                                "MNL when the planned moves do not fit in MNL steps)")
        time_limit: float | None = Field(None, gt=0, description="wall-clock seconds for "
                                         "all solves, for latency studies: results then "
                                         "depend on the machine's load (None: no limit)")
        warm_start: bool = Field(True, description="also run greedy and alpha_vbpp and "
                                 "return the best plan: never worse than either")
        formulation: Literal["aggregated", "per_vm"] = "aggregated"
        mip_rel_gap: float | None = Field(None, ge=0, description="HiGHS relative gap "
                                          "(None: stop once the FR is proven optimal)")

    def reschedule(self, state: MappingState, mnl: int) -> list[Migration]:
        end = None if self.options.time_limit is None else (
            time.monotonic() + self.options.time_limit)
        # (fragment, steps, rank, source, plan): the lowest wins
        candidates: list[tuple[int, int, int, str, list[Migration]]] = [
            (state.fragment(), 0, 3, "none", [])]
        info: dict = {}
        if self.options.warm_start:
            for rank, cls in ((1, Greedy), (2, AlphaVBPP)):
                plan = list(cls().reschedule(state, mnl))
                trial = state.copy()
                trial.apply_all(plan, mnl=mnl)
                candidates.append((trial.fragment(), len(plan), rank, cls.name, plan))
                info[f"{cls.name}_fr"] = trial.fragment_rate()
        best, status, bound, solve_info = self._solve(state, mnl, end)
        info.update(solve_info)
        total_free = state.total_free_cpu()
        if best is not None:
            (frag, steps), seq, mip_info = best
            candidates.append((frag, steps, 0, "mip", seq))
            info.update(mip_info)
            info["mip_fr"] = frag / total_free if total_free else 0.0
        else:
            info["mip_fr"] = None
        frag, _, _, source, plan = min(candidates, key=lambda c: c[:3])
        info["source"] = source
        if bound is not None and frag <= bound:
            status, bound = "optimal", frag
        elif info.get("dropped"):
            status = f"{status}+dropped"
        fr_bound = None if bound is None else (bound / total_free if total_free else 0.0)
        return Plan(plan, status=status, bound=fr_bound, info=info)

    def _solve(self, state: MappingState, mnl: int, end: float | None):
        """Solve (and re-solve at a lower MNL while planned moves are dropped). Returns the
        best ``((fragment, steps), migrations, info)`` or None, the first solve's status,
        its bound as a fragment (cores; None if unknown) and ``{"attempts", "nodes"}``."""
        o = self.options
        build = _aggregated if o.formulation == "aggregated" else _per_vm
        total_free = state.total_free_cpu()
        best = None
        status, bound = None, None
        budget, nodes, attempts = mnl, 0, 0
        while attempts < o.max_solves:
            # HiGHS's presolve is off for the aggregated form: on 70 production-like mappings
            # (MNL 10..50) the root node then took 1.5-2.0 s on average instead of 2.1-2.7 s,
            # at most 4.1 s instead of 7.2 s; the per-VM form needs it
            opts: dict = {"disp": False, "presolve": o.formulation == "per_vm"}
            if o.node_limit is not None:
                opts["node_limit"] = o.node_limit
            if end is not None:
                left = end - time.monotonic()
                if attempts and left < 0.05:
                    break
                opts["time_limit"] = max(left, 0.01)
            attempts += 1
            model = build(state, budget)
            # HiGHS's relative gap is |primal − dual| / |primal| with |primal| at most this
            # scale, so a gap below 15 / scale is less than one 16-core step of the
            # fragment (minus the ε term): HiGHS stops once the FR is proven optimal
            scale = X * (total_free // X) + model.eps * state.n_vms + 1
            opts["mip_rel_gap"] = (o.mip_rel_gap if o.mip_rel_gap is not None
                                   else (X - 1) / scale)
            res = milp(model.c, integrality=model.integrality, bounds=model.bounds,
                       constraints=model.constraints, options=opts)
            nodes += int(getattr(res, "mip_node_count", 0) or 0)
            if status is None:
                status = ("optimal" if res.status == 0 else
                          "no_solution" if res.x is None else
                          "time_limit" if res.status == 1 else
                          "node_limit" if "Solution limit" in str(res.message) else
                          f"highs_status_{res.status}")
                bound = _fragment_bound(res, model, total_free, budget)
            if res.x is None:
                break
            moves = _prune(state, model.moves(np.round(res.x).astype(np.int64)))
            trial = state.copy()
            seq, seq_info = sequence_moves(trial, moves, mnl)
            key = (trial.fragment(), len(seq))
            if best is None or key < best[0]:
                best = (key, seq, {"planned_moves": len(moves), **seq_info,
                                   "fragment_planned": _end_fragment(state, moves)})
            if seq_info["dropped"] == 0 or budget <= 0:
                break
            budget = max(0, budget - seq_info["dropped"])
        return best, status, bound, {"attempts": attempts, "nodes": nodes}


def _end_free(state: MappingState, moves: list[tuple[int, int, int]]):
    """Free cpu and memory ``(H, 2)`` of the end state where every target move is done."""
    fc, fm = state.free_cpu.copy(), state.free_mem.copy()
    for k, h, n in moves:
        _shift(state, fc, fm, k, int(state.vm_host[k]), int(state.vm_numa[k]), +1)
        _shift(state, fc, fm, k, h, n, -1)
    return fc, fm


def _shift(state: MappingState, fc, fm, k: int, h: int, n: int, sign: int) -> None:
    """Add ``sign`` × VM ``k``'s cpu and memory to the free capacity of ``(h, n)``."""
    for j in ((0, 1) if n == BOTH else (n,)):
        fc[h, j] += sign * state.vm_cpu[k]
        fm[h, j] += sign * state.vm_mem[k]


def _end_fragment(state: MappingState, moves: list[tuple[int, int, int]]) -> int:
    """The fragment of the end state where every target move is done (order ignored)."""
    return int((_end_free(state, moves)[0] % X).sum())


def _prune(state: MappingState, moves: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Drop target moves that do not help: repeatedly (in input order) a move whose undoing
    (its VM stays home) leaves the end state valid and its fragment no higher."""
    moves = list(moves)
    fc, fm = _end_free(state, moves)
    changed = True
    while changed:
        changed = False
        for i, (k, h, n) in enumerate(moves):
            h0, n0 = int(state.vm_host[k]), int(state.vm_numa[k])
            tc, tm = fc.copy(), fm.copy()
            _shift(state, tc, tm, k, h, n, +1)
            _shift(state, tc, tm, k, h0, n0, -1)
            if (tc[h0] >= 0).all() and (tm[h0] >= 0).all() and \
                    (tc % X).sum() <= (fc % X).sum():
                fc, fm = tc, tm
                moves.pop(i)
                changed = True
                break
    return moves


def _fragment_bound(res, model: _Model, total_free: int, mnl: int) -> int | None:
    """HiGHS's dual bound as a fragment (cores). The objective is −16·Σy + ε·(VMs moved)
    (minus the constant ``model.offset``) with ε·MNL < 1, so Σy ≤ (−(dual + offset) + ε·MNL)
    / 16, rounded down; the fragment is ``total_free − 16·Σy``, and never below 0."""
    if total_free == 0:
        return 0
    dual = getattr(res, "mip_dual_bound", None)
    if dual is None or not np.isfinite(dual):
        return None
    y_max = np.floor((-(float(dual) + model.offset) + model.eps * mnl) / X + 1e-9)
    return int(max(0, total_free - X * y_max))


class _Model:
    """A milp model: objective ``c``, ``integrality``, ``bounds``, ``constraints``; ``y`` the
    columns of the y variables; ``c·x + offset = −16·Σy + eps·(VMs moved)``; ``moves(x)`` the
    target moves ``(vm, host, numa)`` of a solution."""

    def __init__(self, c, integrality, bounds, constraints, moves, y, eps, offset=0.0):
        self.c = c
        self.integrality = integrality
        self.bounds = bounds
        self.constraints = constraints
        self.moves = moves
        self.y = y
        self.eps = eps
        self.offset = offset


def _capacity_rows(state: MappingState, y0: int):
    """Row/col helpers: the y variables start at column ``y0``; rows 0..2H-1 are cpu and
    2H..4H-1 memory, one per (host, NUMA) flattened."""
    H = state.n_hosts
    y_ub = (state.cap_cpu // X).ravel()
    rows = np.arange(2 * H)
    return y_ub, rows, y0 + rows


def _aggregated(state: MappingState, mnl: int) -> _Model:
    H = state.n_hosts
    mig = np.flatnonzero(state.vm_migratable)
    shapes: dict[tuple[bool, int, int], list[int]] = {}
    for k in mig:
        shapes.setdefault((bool(state.vm_double[k]), int(state.vm_cpu[k]),
                           int(state.vm_mem[k])), []).append(int(k))
    free_c, free_m = state.free_cpu.ravel(), state.free_mem.ravel()
    # the most a (host, NUMA) can have free in any end state: free now + migratable load
    room_c, room_m = _room(state)
    # columns: for each shape s: o vars, p vars, then P_s; finally y (2H)
    col_ub: list[float] = []
    col_int: list[int] = []
    A_rows: list[int] = []
    A_cols: list[int] = []
    A_vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    n_rows = 4 * H  # cpu rows 0..2H-1, mem rows 2H..4H-1
    lo += [-np.inf] * (4 * H)
    hi += list(free_c.astype(float)) + list(free_m.astype(float))
    shape_meta = []

    def new_col(ub: float, integer: bool) -> int:
        col_ub.append(ub)
        col_int.append(1 if integer else 0)
        return len(col_ub) - 1

    def add(r: int, c: int, v: float) -> None:
        A_rows.append(r)
        A_cols.append(c)
        A_vals.append(v)

    P_cols = []
    for (double, c, m), members in shapes.items():
        # original counts per slot (slot = flattened host*2+numa; doubles use numa 0)
        count: dict[int, list[int]] = {}
        for k in members:
            h = int(state.vm_host[k])
            slot = 2 * h + (0 if double else int(state.vm_numa[k]))
            count.setdefault(slot, []).append(k)
        most = min(len(members), mnl)
        if double:
            per_host = np.minimum(room_c.reshape(H, 2) // c,
                                  room_m.reshape(H, 2) // m if m else 10**9).min(axis=1)
            p_ub = {2 * h: min(int(per_host[h]), most) for h in range(H)}
        else:
            ub = np.minimum(room_c // c, room_m // m if m else 10**9)
            p_ub = {s: min(int(ub[s]), most) for s in range(2 * H)}
        o_col = {s: new_col(min(len(ks), most), True) for s, ks in sorted(count.items())}
        p_col = {s: new_col(u, True) for s, u in p_ub.items() if u > 0}
        P = new_col(float(most), False)
        P_cols.append(P)
        for s, col in o_col.items():
            for r in ([s - s % 2, s - s % 2 + 1] if double else [s]):
                add(r, col, -c)
                add(2 * H + r, col, -m)
        for s, col in p_col.items():
            for r in ([s, s + 1] if double else [s]):
                add(r, col, c)
                add(2 * H + r, col, m)
        # sum p - P = 0 ; sum o - P = 0
        for cols in (p_col, o_col):
            for col in cols.values():
                add(n_rows, col, 1)
            add(n_rows, P, -1)
            lo.append(0.0)
            hi.append(0.0)
            n_rows += 1
        # Hall: per host with leavers, o_h + p_h - P <= 0
        hosts_o = sorted({s // 2 for s in o_col})
        for h in hosts_o:
            for s in (2 * h, 2 * h + 1):
                if s in o_col:
                    add(n_rows, o_col[s], 1)
                if s in p_col:
                    add(n_rows, p_col[s], 1)
            add(n_rows, P, -1)
            lo.append(-np.inf)
            hi.append(0.0)
            n_rows += 1
        shape_meta.append((double, count, o_col, p_col))
    # MNL: sum P <= mnl
    for P in P_cols:
        add(n_rows, P, 1)
    lo.append(-np.inf)
    hi.append(float(mnl))
    n_rows += 1
    y0 = len(col_ub)
    _, rows, ycols = _capacity_rows(state, y0)
    y_ub = room_c // X
    for r, col, u in zip(rows, ycols, y_ub, strict=True):
        new_col(float(u), True)
        add(int(r), int(col), X)
    if _SYMMETRY:
        # identical hosts: the more active (Σ o + p) comes first
        activity: dict[int, list[int]] = {}
        for _, _, o_col, p_col in shape_meta:
            for d in (o_col, p_col):
                for sl, col in d.items():
                    activity.setdefault(sl // 2, []).append(col)
        for group in _identical_hosts(state):
            for a, b in zip(group, group[1:], strict=False):
                for col in activity.get(a, []):
                    add(n_rows, col, 1)
                for col in activity.get(b, []):
                    add(n_rows, col, -1)
                lo.append(0.0)
                hi.append(np.inf)
                n_rows += 1
    n = len(col_ub)
    A = sp.csr_array((A_vals, (A_rows, A_cols)), shape=(n_rows, n))
    eps = _EPS_SCALE / (mnl + 1)
    cvec = np.zeros(n)
    cvec[y0:] = -X
    for _, _, o_col, _ in shape_meta:
        cvec[list(o_col.values())] = eps  # tie-breaker: fewer moves (Σ o = VMs moved)
    model = _Model(cvec, np.array(col_int), Bounds(np.zeros(n), np.array(col_ub)),
                   LinearConstraint(A, np.array(lo), np.array(hi)), None,
                   np.arange(y0, n), eps)

    def moves(x: np.ndarray) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        for double, count, o_col, p_col in shape_meta:
            outs = {s: int(x[col]) for s, col in o_col.items() if x[col] > 0}
            ins = {s: int(x[col]) for s, col in p_col.items() if x[col] > 0}
            outs, ins = _cancel(outs, ins)
            leavers = {s: list(count[s][:n]) for s, n in outs.items()}
            for (src, dst) in _match(outs, ins):
                k = leavers[src].pop(0)
                h, j = divmod(dst, 2)
                out.append((k, h, BOTH if double else j))
        return sorted(out)

    model.moves = moves
    return model


#: add the identical-host ordering rows (see MIP); a switch for measuring them
_SYMMETRY = True


def _identical_hosts(state: MappingState) -> list[list[int]]:
    """Groups (of 2 or more, in host order) of hosts with the same free cpu and memory per
    NUMA and the same VMs (shape, NUMA, migratable): interchangeable in every end state."""
    groups: dict[tuple, list[int]] = {}
    order = np.argsort(state.vm_host, kind="stable")
    bounds = np.searchsorted(state.vm_host[order], np.arange(state.n_hosts + 1))
    for h in range(state.n_hosts):
        on = order[bounds[h]:bounds[h + 1]]
        vms = tuple(sorted(zip(state.vm_double[on].tolist(), state.vm_cpu[on].tolist(),
                               state.vm_mem[on].tolist(), state.vm_numa[on].tolist(),
                               state.vm_migratable[on].tolist(), strict=True)))
        key = (tuple(state.free_cpu[h].tolist()), tuple(state.free_mem[h].tolist()), vms)
        groups.setdefault(key, []).append(h)
    return [g for g in groups.values() if len(g) > 1]


def _room(state: MappingState) -> tuple[np.ndarray, np.ndarray]:
    """``(2H,)`` cpu and memory each (host, NUMA) has free once every migratable VM on it
    has left: no end state has more."""
    load = vm_numa_load(state)
    mig = state.vm_migratable
    room_c, room_m = state.free_cpu.copy(), state.free_mem.copy()
    for j in (0, 1):
        on = mig & (load[:, j] > 0)
        np.add.at(room_c[:, j], state.vm_host[on], load[on, j])
        np.add.at(room_m[:, j], state.vm_host[on], state.vm_mem[on])
    return room_c.ravel(), room_m.ravel()


def _cancel(outs: dict[int, int], ins: dict[int, int]):
    """Cancel VMs of one shape leaving and arriving at the same (host, NUMA) (a pointless
    swap: same end state, fewer moves), unless the rest would break Hall's condition."""
    net_o = {s: n - min(n, ins.get(s, 0)) for s, n in outs.items()}
    net_p = {s: n - min(n, outs.get(s, 0)) for s, n in ins.items()}
    net_o = {s: n for s, n in net_o.items() if n}
    net_p = {s: n for s, n in net_p.items() if n}
    per_host: dict[int, int] = {}
    for d in (net_o, net_p):
        for s, n in d.items():
            per_host[s // 2] = per_host.get(s // 2, 0) + n
    total = sum(net_o.values())
    if all(n <= total for n in per_host.values()):
        return net_o, net_p
    return outs, ins


def _match(outs: dict[int, int], ins: dict[int, int]) -> list[tuple[int, int]]:
    """Pair leaving slots with arriving slots on other hosts, largest host first (always
    succeeds when, per host, leavers + arrivals <= total moves: Hall's condition)."""
    o_host: dict[int, int] = {}
    p_host: dict[int, int] = {}
    for s, n in outs.items():
        o_host[s // 2] = o_host.get(s // 2, 0) + n
    for s, n in ins.items():
        p_host[s // 2] = p_host.get(s // 2, 0) + n
    outs, ins = dict(outs), dict(ins)
    pairs: list[tuple[int, int]] = []

    def load(h: int) -> int:
        return o_host.get(h, 0) + p_host.get(h, 0)

    def take(d: dict[int, int], per_host: dict[int, int], h: int) -> int:
        s = next(s for s in (2 * h, 2 * h + 1) if d.get(s, 0) > 0)
        d[s] -= 1
        per_host[h] -= 1
        return s

    while any(o_host.values()):
        hosts = sorted(set(o_host) | set(p_host), key=lambda h: (-load(h), h))
        a = hosts[0]
        if o_host.get(a, 0) > 0:
            b = next((h for h in hosts if h != a and p_host.get(h, 0) > 0), None)
            if b is None:
                break
            pairs.append((take(outs, o_host, a), take(ins, p_host, b)))
        else:
            b = next((h for h in hosts if h != a and o_host.get(h, 0) > 0), None)
            if b is None:
                break
            pairs.append((take(outs, o_host, b), take(ins, p_host, a)))
    return pairs


def _per_vm(state: MappingState, mnl: int) -> _Model:
    """Eqs. 1–7 with one binary per migratable VM and option (vectorised build)."""
    H = state.n_hosts
    mig = np.flatnonzero(state.vm_migratable)
    M = len(mig)
    load = vm_numa_load(state)
    fixed = ~state.vm_migratable
    fixed_c = state.cap_cpu.copy()
    fixed_m = state.cap_mem.copy()
    for j in (0, 1):
        np.subtract.at(fixed_c[:, j], state.vm_host[fixed], load[fixed, j])
        np.subtract.at(fixed_m[:, j], state.vm_host[fixed],
                       np.where(load[fixed, j] > 0, state.vm_mem[fixed], 0))
    c, m = state.vm_cpu[mig], state.vm_mem[mig]
    h0, n0 = state.vm_host[mig], state.vm_numa[mig]
    double = state.vm_double[mig]
    fits = ((state.cap_cpu[None] >= c[:, None, None])
            & (state.cap_mem[None] >= m[:, None, None]))            # (M, H, 2)
    hosts = np.arange(H)
    own = hosts[None, :] == h0[:, None]                               # (M, H)
    # single-NUMA options: any fitting (host, numa) except the other NUMA of its own host
    single_ok = fits & ~double[:, None, None]
    single_ok &= ~(own[:, :, None] & (np.arange(2)[None, None, :] != n0[:, None, None]))
    # double-NUMA options: one per host where both NUMAs fit, kept in column 0
    double_ok = np.zeros_like(fits)
    double_ok[:, :, 0] = fits.all(axis=2) & double[:, None]
    ok = single_ok | double_ok
    vi, hi_, ji = np.nonzero(ok)                                      # columns, VM-major
    nx = len(vi)
    is_double = double[vi]
    col_numa = np.where(is_double, BOTH, ji)
    cols_vm = mig[vi]
    stay = (hi_ == h0[vi]) & (is_double | (ji == n0[vi]))
    # capacity entries: single -> its (h, j); double -> (h, 0) and (h, 1)
    cap_col = np.concatenate([np.arange(nx), np.flatnonzero(is_double)])
    cap_slot = np.concatenate([2 * hi_ + ji, 2 * hi_[is_double] + 1])
    rows = np.concatenate([cap_slot, 2 * H + cap_slot, 4 * H + vi, np.full(stay.sum(), 4 * H + M),
                           np.arange(2 * H)])
    cidx = np.concatenate([cap_col, cap_col, np.arange(nx), np.flatnonzero(stay),
                           nx + np.arange(2 * H)])
    vals = np.concatenate([c[vi[cap_col]], m[vi[cap_col]], np.ones(nx), np.ones(stay.sum()),
                           np.full(2 * H, X)]).astype(float)
    n = nx + 2 * H
    n_rows = 4 * H + M + 1
    A = sp.csr_array((vals, (rows, cidx)), shape=(n_rows, n))
    lo = np.concatenate([np.full(4 * H, -np.inf), np.ones(M), [M - mnl]])
    hi = np.concatenate([fixed_c.ravel(), fixed_m.ravel(), np.ones(M), [np.inf]]).astype(float)
    eps = _EPS_SCALE / (mnl + 1)
    cvec = np.zeros(n)
    cvec[nx:] = -X
    cvec[:nx][stay] = -eps  # tie-breaker: eps·(VMs moved) = eps·M − eps·Σ x_stay
    ub = np.concatenate([np.ones(nx), (state.cap_cpu // X).ravel().astype(float)])

    def moves(x: np.ndarray) -> list[tuple[int, int, int]]:
        chosen = np.flatnonzero((x[:nx] > 0) & ~stay)
        return sorted((int(cols_vm[i]), int(hi_[i]), int(col_numa[i])) for i in chosen)

    return _Model(cvec, np.ones(n, dtype=int), Bounds(np.zeros(n), ub),
                  LinearConstraint(A, lo, hi), moves, np.arange(nx, n), eps, offset=eps * M)
