"""VMR²L's heuristic reschedulers, ``greedy`` and ``alpha_vbpp``, and the vectorised fragment
arithmetic they share with the MIP.

Both minimise the fragment rate FR = Σ (free_cpu mod 16) / Σ free_cpu. A migration moves
cores from one active host to another, so Σ free_cpu is constant and every comparison below
is made on the *fragment* ``Σ free_cpu mod 16`` (integer cores). Ties go to the earlier VM,
then the earlier host, then NUMA 0 before NUMA 1 (input order).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from dcsim.reschedulers.base import Plan, Rescheduler, sequence_moves
from dcsim.vm.model import BOTH, FRAGMENT_CORES, MappingState, Migration
from dcsim.vm.view import MappingView

X = FRAGMENT_CORES
_NEG = np.iinfo(np.int64).min // 4


# -- vectorised fragment arithmetic -----------------------------------------------------------
def vm_numa_load(state: MappingState) -> np.ndarray:
    """``(V, 2)`` cpu each VM uses on NUMA 0 and 1 of its host."""
    load = np.zeros((state.n_vms, 2), dtype=np.int64)
    single = ~state.vm_double
    load[single, state.vm_numa[single]] = state.vm_cpu[single]
    load[state.vm_double] = state.vm_cpu[state.vm_double, None]
    return load


def removal_gains(state: MappingState, free_cpu: np.ndarray | None = None) -> np.ndarray:
    """``(V,)`` how much the fragment of each VM's host drops if the VM leaves it
    (the authors' ``get_vm_dec_contrib``)."""
    free = state.free_cpu if free_cpu is None else free_cpu
    f = free[state.vm_host]
    return (f % X).sum(axis=1) - ((f + vm_numa_load(state)) % X).sum(axis=1)


def insertion_gains(state: MappingState, k: int, free_cpu: np.ndarray | None = None,
                    free_mem: np.ndarray | None = None) -> np.ndarray:
    """``(H, 2)`` how much the fragment of each host drops if VM ``k`` arrives on NUMA j
    (the authors' ``get_vm_inc_contrib``); ``_NEG`` where it does not fit (cpu or memory;
    the authors check cpu only) or on the VM's own host. A double-NUMA VM's gain is in
    column 0 (the BOTH option) and column 1 is ``_NEG``."""
    fc = state.free_cpu if free_cpu is None else free_cpu
    fm = state.free_mem if free_mem is None else free_mem
    c, m = state.vm_cpu[k], state.vm_mem[k]
    fits = (fc >= c) & (fm >= m)
    delta = fc % X - (fc - c) % X
    if state.vm_double[k]:
        g = np.full(fc.shape, _NEG, dtype=np.int64)
        both = fits.all(axis=1)
        g[both, 0] = delta[both].sum(axis=1)
    else:
        g = np.where(fits, delta, _NEG)
    g[state.vm_host[k]] = _NEG
    return g


def _option(state: MappingState, k: int, flat: int) -> Migration:
    h, j = divmod(int(flat), 2)
    return Migration(k, h, BOTH if state.vm_double[k] else j)


# -- greedy ----------------------------------------------------------------------------------
class Greedy(Rescheduler):
    """VMR²L's greedy baseline (Appendix B.2; the authors' ``baselines/heuristics.py``).

    Each step: *filtering* picks, among the migratable VMs of at most ``max_vm_cpu`` cores,
    the one whose removal lowers its source host's fragment most; *scoring* picks the
    (host, NUMA option) other than the source host, with room for the VM's cpu and memory,
    whose fragment drops most when the VM arrives. The move is made if the two drops add
    up to more than 0; otherwise (or when the VM fits nowhere) the greedy stops early, as
    the authors' code does. Ties: earlier VM, earlier host, NUMA 0. Both stages are numpy
    expressions over all VMs / all hosts × NUMAs.
    """

    name = "greedy"
    description = "VMR²L's filter+score greedy: best VM to remove, then best destination"

    class Options(Rescheduler.Options):
        max_vm_cpu: int = Field(16, ge=1, description="only VMs with at most this many cores "
                                "move (the paper's filter)")

    def reschedule(self, view: MappingView, mnl: int) -> list[Migration]:
        state = view.copy()
        small = state.vm_migratable & (state.vm_cpu * np.where(state.vm_double, 2, 1)
                                       <= self.options.max_vm_cpu)
        out: list[Migration] = []
        status = "mnl_reached"
        while len(out) < mnl:
            gains = np.where(small, removal_gains(state), _NEG)
            k = int(gains.argmax())
            if gains[k] == _NEG:
                status = "no_candidate"
                break
            ins = insertion_gains(state, k)
            flat = int(ins.argmax())
            if ins.flat[flat] == _NEG:
                status = "no_destination"
                break
            if gains[k] + ins.flat[flat] <= 0:
                status = "early_stop"
                break
            m = _option(state, k, flat)
            out.append(m)
            state.apply(m, len(out))
        return Plan(out, status=status)


# -- alpha-VBPP ------------------------------------------------------------------------------
class AlphaVBPP(Rescheduler):
    """α-VBPP (Appendix B.2): stages of α VMs removed and re-placed by vector bin packing.

    A stage (with ``b`` = min(α, migrations left)):

    1. *Remove* ``b`` VMs one by one, each time the migratable VM (not yet tried) whose
       removal lowers its host's fragment most, given the earlier removals (ties: input
       order).
    2. *Re-place* them by vector bin packing, Panigrahy et al.'s *norm-based greedy* with
       items in decreasing size: VMs sorted by cpu/88 + mem/368776 (their share of a
       host), largest first (ties: input order); each goes to the option (host × NUMA, or
       host for a double-NUMA VM) that fits its cpu and memory and leaves the smallest
       Σ over the NUMAs used of ((free cpu − cpu)/cpu capacity)² + ((free mem − mem)/mem
       capacity)², i.e. the tightest fit (ties: earlier host, NUMA 0). Its own host is
       allowed only on its original NUMA (staying put is not a migration; changing NUMA
       within a host is not allowed).
    3. The VMs that ended elsewhere are migrated, ordered by :func:`sequence_moves`. The
       stage is kept only if the fragment drops; otherwise it is undone and its ``b`` VMs
       are marked tried (never removed again), so the next stage tries the next-worst VMs.

    Stops when ``mnl`` migrations are used, every migratable VM has been tried, or a
    stage cannot re-place its VMs.
    """

    name = "alpha_vbpp"
    description = "stages of alpha worst-fragment VMs re-placed by vector bin packing"

    class Options(Rescheduler.Options):
        alpha: int = Field(10, ge=1, description="VMs removed and re-placed per stage")

    def reschedule(self, view: MappingView, mnl: int) -> list[Migration]:
        state = view.copy()
        out: list[Migration] = []
        tried = ~state.vm_migratable.copy()
        stages = kept = 0
        status = "mnl_reached"
        norm = (state.vm_cpu * np.where(state.vm_double, 2, 1) / (2 * state.cap_cpu.max())
                + state.vm_mem * np.where(state.vm_double, 2, 1)
                / max(1, 2 * state.cap_mem.max()))
        cap_cpu = np.maximum(state.cap_cpu, 1).astype(float)
        cap_mem = np.maximum(state.cap_mem, 1).astype(float)
        while len(out) < mnl:
            b = min(self.options.alpha, mnl - len(out))
            fc, fm = state.free_cpu.copy(), state.free_mem.copy()
            load = vm_numa_load(state)
            mem_load = np.where(load > 0, state.vm_mem[:, None], 0)
            removed: list[int] = []
            for _ in range(b):
                gains = np.where(tried, _NEG, removal_gains(state, fc))
                if removed:
                    gains[removed] = _NEG
                k = int(gains.argmax())
                if gains[k] == _NEG:
                    break
                h = state.vm_host[k]
                fc[h] += load[k]
                fm[h] += mem_load[k]
                removed.append(k)
            if not removed:
                status = "all_tried"
                break
            stages += 1
            targets: list[tuple[int, int, int]] = []
            failed = False
            for k in sorted(removed, key=lambda v: -norm[v]):  # stable: input order ties
                c, m = state.vm_cpu[k], state.vm_mem[k]
                fits = (fc >= c) & (fm >= m)
                resid = ((fc - c) / cap_cpu) ** 2 + ((fm - m) / cap_mem) ** 2
                h0, n0 = int(state.vm_host[k]), int(state.vm_numa[k])
                if state.vm_double[k]:
                    ok = fits.all(axis=1)
                    score = np.where(ok, resid.sum(axis=1), np.inf)
                    if not ok.any():
                        failed = True
                        break
                    h = int(score.argmin())
                    fc[h] -= c
                    fm[h] -= m
                    targets.append((k, h, BOTH))
                else:
                    ok = fits.copy()
                    ok[h0, 1 - n0] = False
                    if not ok.any():
                        failed = True
                        break
                    flat = int(np.where(ok, resid, np.inf).argmin())
                    h, j = divmod(flat, 2)
                    fc[h, j] -= c
                    fm[h, j] -= m
                    targets.append((k, h, j))
            if failed:
                status = "no_fit"
                break
            trial = state.copy()
            moves, _ = sequence_moves(trial, sorted(targets), mnl - len(out))
            if moves and trial.fragment() < state.fragment():
                out.extend(moves)
                state = trial
                kept += 1
            tried[removed] = True
        return Plan(out, status=status, info={"stages": stages, "kept_stages": kept})
