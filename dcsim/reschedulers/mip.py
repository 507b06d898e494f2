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
from dcsim.reschedulers.heuristics import X, vm_numa_load
from dcsim.vm.model import BOTH, MappingState, Migration

#: the MIP's tie-breaker per moved VM is _EPS_SCALE / (MNL + 1) (see MIP); small, because a
#: large one slowed HiGHS's root node down ~2x on the medium set
_EPS_SCALE = 0.01


# -- MIP -------------------------------------------------------------------------------------
class MIP(Rescheduler):
    """The paper's MIP (Appendix A.1, eqs. 1–7) solved by HiGHS (``scipy.optimize.milp``).

    Objective (eq. 1): minimise Σ_ij (U_ij − load_ij − 16·y_ij) with integer y_ij ≥ 0 and
    load_ij + 16·y_ij ≤ U_ij (eq. 2): at the optimum y_ij = ⌊free_ij / 16⌋, so the objective
    is the fragment. Since Σ load is fixed, we minimise −16·Σ y and add the constant back.
    Memory (eq. 3), every VM placed once (eq. 4) on both NUMAs of one host if double-NUMA
    (eq. 6, by using one variable per host for such VMs), at most MNL VMs off their original
    (host, NUMA) (eq. 5). Reformulations (documented differences):

    * ``formulation="aggregated"`` (default): VMs of the same shape (single/double, cpu,
      memory) are interchangeable for every constraint and for FR, so instead of one binary
      per VM × host × NUMA the variables count, per shape and (host, NUMA), the VMs that
      leave (``o``, at most the migratable ones there) and arrive (``p``). Then
      Σ o = Σ p per shape and Σ o ≤ MNL is eq. 5. Same optimum, ~200× fewer variables
      on the medium set (≈ 5 k instead of ≈ 1.05 M): HiGHS proves the optimum there in
      2–5 s, where the paper reports 50 min for Gurobi on eqs. 1–7. Which VM of a shape
      leaves a slot is chosen in input order.
    * Same-host moves are not migrations in our model (a VM cannot move to the host it is
      on), whereas eq. 5 would let a single-NUMA VM change NUMA within its host at the cost
      of one migration. ``per_vm`` drops those variables; ``aggregated`` adds, per shape and
      host, (VMs leaving) + (VMs arriving) ≤ (VMs of that shape moving in total), the
      condition under which leavers can be matched to arrivals on *other* hosts (Hall's
      condition); the matching is then built largest-first.
    * ``formulation="per_vm"`` is eqs. 1–7 as written (one binary per VM and option), for
      small instances and for checking the aggregation. On the medium set it needs ≈ 1.2 GB
      and HiGHS finds no feasible point in 5 s (its presolve also overruns the limit:
      ≈ 23 s of wall time; HiGHS checks the limit only between phases).
    * Tie-breaker: the objective adds ε·(VMs moved) with ε = 0.01/(MNL+1), so ε·MNL < 1 while
      the fragment moves in steps of 16 cores: the FR optimum is unchanged, but among
      equally good end states the one with the fewest moves wins (no pointless swaps,
      which would otherwise cost steps and can form cycles).

    The solution is an end state; :func:`sequence_moves` orders its moves so that each step
    is valid, with a detour through a third host to break a cycle (one extra step). If the
    moves do not fit in MNL steps, the MIP is solved again with MNL lowered by the number of
    moves left over, within the same time limit; the best sequence found is returned.

    ``bound`` is HiGHS's dual bound turned into FR units (the ε term removed and the
    fragment rounded up to the 16-core lattice it lives on): no end state with at most MNL
    VMs on other hosts (and none on the other NUMA of its own host) has a lower FR. It is
    the bound of the first solve (at the full MNL).
    ``status``: ``optimal`` (the FR is proven optimal; the fewer-moves tie-break may not
    be), ``time_limit`` (best solution found when time ran out; if it is worse than moving
    nothing, no migrations and ``info["worse_than_no_move"]``), ``no_solution`` (HiGHS found
    no feasible point within the limit: no migrations), with ``+dropped`` appended when
    some planned moves could not be sequenced within MNL steps (``info["dropped"]``).
    """

    name = "mip"
    description = "the paper's MIP (A.1) solved with HiGHS within a time limit"

    class Options(Rescheduler.Options):
        time_limit: float = Field(5.0, gt=0, description="seconds HiGHS may use in all")
        formulation: Literal["aggregated", "per_vm"] = "aggregated"
        mip_rel_gap: float | None = Field(None, ge=0, description="HiGHS relative gap "
                                          "(None: stop once the FR is proven optimal)")

    def reschedule(self, state: MappingState, mnl: int) -> list[Migration]:
        deadline = time.monotonic() + self.options.time_limit
        total_free = state.total_free_cpu()
        build = _aggregated if self.options.formulation == "aggregated" else _per_vm
        best: Plan | None = None
        best_key = None
        budget = mnl
        first_status, bound = None, None
        attempts = 0
        while True:
            left = deadline - time.monotonic()
            if attempts and left < 0.05:
                break
            attempts += 1
            model = build(state, budget)
            opts = {"time_limit": max(left, 0.01), "disp": False,
                    "mip_rel_gap": self.options.mip_rel_gap}
            if opts["mip_rel_gap"] is None:
                # |objective| <= 16·Σ y_ub + 1, so this gap is < 15 in absolute terms: less
                # than one 16-core step of the fragment, i.e. HiGHS stops once the FR is
                # optimal (the fewer-moves tie-break is then best effort)
                y_ub = int((state.cap_cpu // X).sum())
                opts["mip_rel_gap"] = (X - 1) / (X * y_ub + 1)
            res = milp(model.c, integrality=model.integrality, bounds=model.bounds,
                       constraints=model.constraints, options=opts)
            status = ("optimal" if res.status == 0 else
                      "time_limit" if res.status == 1 else f"highs_status_{res.status}")
            if first_status is None:
                first_status = status
                bound = _fr_bound(res, model, total_free, budget)
            if res.x is None:
                if best is None:
                    return Plan([], status="no_solution", bound=bound,
                                info={"highs_message": str(res.message)})
                break
            x = np.round(res.x).astype(np.int64)
            moves = model.moves(x)
            trial = state.copy()
            seq, info = sequence_moves(trial, moves, mnl)
            plan = Plan(seq, status=first_status, bound=bound,
                        info={"planned_moves": len(moves), **info, "attempts": attempts,
                              "fragment_planned": _end_fragment(state, moves)})
            key = (trial.fragment(), info["dropped"], len(seq))
            if best is None or key < best_key:
                best, best_key = plan, key
            if info["dropped"] == 0 or budget <= 0:
                break
            budget = max(0, budget - info["dropped"])
        assert best is not None
        if best_key[0] > state.fragment():
            # a time-limited incumbent can be worse than moving nothing: keep the mapping
            return Plan([], status=first_status, bound=bound,
                        info={**best.info, "worse_than_no_move": True})
        if best.info.get("dropped"):
            best.status = f"{best.status}+dropped"
        return best


def _end_fragment(state: MappingState, moves: list[tuple[int, int, int]]) -> int:
    """The fragment of the end state where every target move is done (order ignored)."""
    free = state.free_cpu.copy()
    for k, h, n in moves:
        for j in ((0, 1) if state.vm_numa[k] == BOTH else (int(state.vm_numa[k]),)):
            free[state.vm_host[k], j] += state.vm_cpu[k]
        for j in ((0, 1) if n == BOTH else (n,)):
            free[h, j] -= state.vm_cpu[k]
    return int((free % X).sum())


def _fr_bound(res, model: _Model, total_free: int, mnl: int) -> float | None:
    """HiGHS's dual bound in FR units. The objective is −16·Σy + ε·(VMs moved) (minus the
    constant ``model.offset``) with ε·MNL < 1, so Σy ≤ (−(dual + offset) + ε·MNL) / 16,
    rounded down; the fragment is ``total_free − 16·Σy``."""
    if total_free == 0:
        return 0.0
    dual = getattr(res, "mip_dual_bound", None)
    if dual is None or not np.isfinite(dual):
        return None
    y_max = np.floor((-(float(dual) + model.offset) + model.eps * mnl) / X + 1e-9)
    return max(0.0, (total_free - X * y_max) / total_free)


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
    cap_c, cap_m = state.cap_cpu.ravel(), state.cap_mem.ravel()
    free_c, free_m = state.free_cpu.ravel(), state.free_mem.ravel()
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
        if double:
            per_host = np.minimum(state.cap_cpu // c, state.cap_mem // m if m else 10**9)
            p_ub = {2 * h: int(per_host[h].min()) for h in range(H)}
        else:
            ub = np.minimum(cap_c // c, cap_m // m if m else 10**9)
            p_ub = {s: int(ub[s]) for s in range(2 * H)}
        o_col = {s: new_col(len(ks), True) for s, ks in sorted(count.items())}
        p_col = {s: new_col(u, True) for s, u in p_ub.items() if u > 0}
        P = new_col(float(len(members)), False)
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
    y_ub, rows, ycols = _capacity_rows(state, y0)
    for r, col, u in zip(rows, ycols, y_ub, strict=True):
        new_col(float(u), True)
        add(int(r), int(col), X)
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
            leavers = {s: list(count[s][:n]) for s, n in outs.items()}
            for (src, dst) in _match(outs, ins):
                k = leavers[src].pop(0)
                h, j = divmod(dst, 2)
                out.append((k, h, BOTH if double else j))
        return sorted(out)

    model.moves = moves
    return model


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
