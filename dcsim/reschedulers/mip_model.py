"""The MIP's formulations (VMR²L Appendix A.1, tightened): the aggregated model over
(VM type, host, NUMA) counts with identical hosts ordered, and the per-VM model; each
returns the matrices ``scipy.optimize.milp`` solves and how to read a solution back as
moves."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint

from dcsim.reschedulers.heuristics import X, vm_numa_load
from dcsim.vm.model import BOTH, MappingState

#: the weight of a tie-breaker ε·(VMs moved) in the objective is _EPS_SCALE / (MNL + 1). It is
#: 0: with ε = 0.01/(MNL + 1) HiGHS needed up to 13 s (a 51-node search) where the plain
#: objective, integral in steps of 16 cores, was solved at the root node in at most 4.1 s
#: (50 production-like mappings, MNL 10..50); pointless moves are removed afterwards instead
#: (see MIP). The bound arithmetic still accounts for any ε > 0.
_EPS_SCALE = 0.0


class MilpModel:
    """What :func:`aggregated_model` and :func:`per_vm_model` build for
    ``scipy.optimize.milp``: objective ``c``, ``integrality``, ``bounds``, ``constraints``;
    ``y`` the columns of the y variables; ``c·x + offset = −16·Σy + eps·(VMs moved)``;
    ``moves(x)`` the target moves ``(vm, host, numa)`` of a solution."""

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


def aggregated_model(state: MappingState, mnl: int) -> MilpModel:
    """The MIP's default form (``formulation="aggregated"``): per VM shape and (host, NUMA),
    integer counts of the VMs that leave and arrive, at most ``mnl`` leaving in all, with
    Hall's condition per shape and host and identical hosts ordered by activity (see
    :class:`~dcsim.reschedulers.mip.MIP`)."""
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
    model = MilpModel(cvec, np.array(col_int), Bounds(np.zeros(n), np.array(col_ub)),
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


def per_vm_model(state: MappingState, mnl: int) -> MilpModel:
    """The MIP's ``formulation="per_vm"``: eqs. 1–7 with one binary per migratable VM and
    option, at most ``mnl`` VMs moved (vectorised build)."""
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

    return MilpModel(cvec, np.ones(n, dtype=int), Bounds(np.zeros(n), ub),
                     LinearConstraint(A, lo, hi), moves, np.arange(nx, n), eps,
                     offset=eps * M)
