"""VMR²L's MIP baseline (Appendix A.1), ``mip``: the fragment-rate optimum under the MNL,
solved with HiGHS through ``scipy.optimize.milp``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from dcsim.reschedulers.base import Plan, Rescheduler, sequence_moves
from dcsim.reschedulers.heuristics import AlphaVBPP, Greedy, X
from dcsim.vm.model import BOTH, MappingState, Migration
from dcsim.vm.view import MappingView

if TYPE_CHECKING:
    from dcsim.reschedulers.mip_model import MilpModel


# -- MIP -------------------------------------------------------------------------------------

def milp(*args, **kwargs):
    """``scipy.optimize.milp``, imported on the first solve: scipy.optimize costs about
    0.5 s to import, which a command that never solves a MIP should not pay."""
    from scipy.optimize import milp as highs_milp

    return highs_milp(*args, **kwargs)

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
      slower on 280 hosts, see ``mip_model._EPS_SCALE``): the objective is integral in 16-core steps
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
    planned moves could not be sequenced within MNL steps (``info["dropped"]``, or those
    of the first solve, which a re-solve at a lower MNL replaced: ``attempts`` > 1): then
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

    def reschedule(self, view: MappingView, mnl: int) -> list[Migration]:
        state = view.copy()  # read only here; a MappingState for the model builder
        end = None if self.options.time_limit is None else (
            time.monotonic() + self.options.time_limit)
        # (fragment, steps, rank, source, plan): the lowest wins
        candidates: list[tuple[int, int, int, str, list[Migration]]] = [
            (state.fragment(), 0, 3, "none", [])]
        info: dict = {}
        if self.options.warm_start:
            for rank, cls in ((1, Greedy), (2, AlphaVBPP)):
                plan = list(cls().reschedule(MappingView(state), mnl))
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
        elif info.get("dropped") or info["attempts"] > 1:  # a re-solve: the first dropped
            status = f"{status}+dropped"
        fr_bound = None if bound is None else (bound / total_free if total_free else 0.0)
        return Plan(plan, status=status, bound=fr_bound, info=info)

    def _solve(self, state: MappingState, mnl: int, end: float | None):
        """Solve (and re-solve at a lower MNL while planned moves are dropped). Returns the
        best ``((fragment, steps), migrations, info)`` or None, the first solve's status,
        its bound as a fragment (cores; None if unknown) and ``{"attempts", "nodes"}``."""
        from dcsim.reschedulers.mip_model import aggregated_model, per_vm_model

        o = self.options
        build = aggregated_model if o.formulation == "aggregated" else per_vm_model
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


def _fragment_bound(res, model: MilpModel, total_free: int, mnl: int) -> int | None:
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
