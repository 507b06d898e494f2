"""The loss engine's arrival/departure loop over one workload batch as one numba kernel
(:mod:`dcsim.modes.loss.compiled_loop` decides when and hands it its state).

It runs, for ``first_fit`` on two resources, what the fused loop
(:meth:`~dcsim.modes.loss.engine.Engine._fused_arrivals`) runs per request, with the same
floating-point operations in the same order: the clock ``now + (t - now)`` and the id the
arrival's ``Timeout`` would draw; the departures due before it popped in SimPy's
``(time, priority, id)`` order (all ``NORMAL``: ``(time, id)``) from its own binary heap,
each released as ``give_one`` releases it (clamped to capacity) with the meter's ``used``
lowered; the per-request utilisation sample of a measured request; ``first_fit``'s
comparison ``free >= demand - EPS`` of each column, lowest index first; ``take_one``'s
reservation (refused below ``-tol``, clamped at 0); the meter's ``held`` (``used`` raised,
``area`` and ``active area`` grown by ``amount * span`` while the window is open).

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

from dcsim.allocators.kernel_cache import njit

#: why :func:`run_batch` stopped
DONE = 0        # every request of the batch was handled
HAND_OVER = 1   # request ``stop`` is for the fused loop (the window opens, or a per-request
                # sample is due before it): nothing of it was done
REFUSED = 2     # request ``stop``'s server refused it (take_one): done up to its decision
SAMPLE = 3      # a per-request sample is due before request ``stop``'s decision: the clock
                # is at it (its departures done); call again with ``resume`` to go on


@njit(cache=True)
def _less(ht, hid, a, b):
    return ht[a] < ht[b] or (ht[a] == ht[b] and hid[a] < hid[b])


@njit(cache=True)
def _swap(ht, hid, hslot, a, b):
    ht[a], ht[b] = ht[b], ht[a]
    hid[a], hid[b] = hid[b], hid[a]
    hslot[a], hslot[b] = hslot[b], hslot[a]


@njit(cache=True)
def _push(ht, hid, hslot, size, t, eid, slot):
    i = size
    ht[i] = t
    hid[i] = eid
    hslot[i] = slot
    while i > 0:
        p = (i - 1) >> 1
        if _less(ht, hid, i, p):
            _swap(ht, hid, hslot, i, p)
            i = p
        else:
            break
    return size + 1


@njit(cache=True)
def _pop(ht, hid, hslot, size):
    """Remove the root (the caller read it); returns the new size."""
    size -= 1
    if size > 0:
        ht[0] = ht[size]
        hid[0] = hid[size]
        hslot[0] = hslot[size]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            m = left
            right = left + 1
            if right < size and _less(ht, hid, right, left):
                m = right
            if _less(ht, hid, m, i):
                _swap(ht, hid, hslot, m, i)
                i = m
            else:
                break
    return size


@njit(cache=True)
def heapify(ht, hid, hslot, size):
    """Order ``size`` entries as a heap (in place)."""
    for start in range((size - 2) // 2, -1, -1):
        i = start
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            m = left
            right = left + 1
            if right < size and _less(ht, hid, right, left):
                m = right
            if _less(ht, hid, m, i):
                _swap(ht, hid, hslot, m, i)
                i = m
            else:
                break


@njit(cache=True)
def run_batch(times, dur, d0, d1, i0, rid0, warm_requests, warm_time, is_open, every, resume,
              c0, c1, k0, k1, tol, eps, cap0, cap1,
              ht, hid, hslot, size, dep_server, dep_a0, dep_a1, slot0,
              acc, now, next_id, choice, start, util0, util1):
    """Requests ``i0..`` of a batch (``times``, ``dur``, demands ``d0``/``d1``; request
    ``i`` has id ``rid0 + i``), from clock ``now`` and next event id ``next_id``.

    ``c0``/``c1`` are the free columns (written in place), ``k0``/``k1`` the capacity
    columns, ``cap0``/``cap1`` the total capacities (the utilisation samples' divisors).
    The heap (``ht`` time, ``hid`` id, ``hslot`` slot; ``size`` entries) holds the
    departures; a slot's server and amounts are ``dep_*[slot]``, request ``i``'s departure
    gets slot ``slot0 + i``. ``acc`` = ``[used0, used1, area0, area1, active_area]``,
    updated in place. Writes ``choice[i]`` (-1: rejected), ``start[i]`` (the clock at its
    decision) and, for measured requests, ``util0/util1[i]``.

    A request that opens the measured window (``is_open`` False, the first measured
    one) is left to the fused loop: the kernel stops before it (:data:`HAND_OVER`). Before
    the decision of a request whose id is a multiple of ``every`` (> 0) a per-request
    sample is due: the kernel stops there (:data:`SAMPLE`; its departures are done, the
    clock ``now`` is at it) and goes on from it when called again with ``resume`` True.

    Returns ``(why, stop, now, next_id, size, accepted)``: ``why`` is :data:`DONE`,
    :data:`HAND_OVER` or :data:`REFUSED`; requests ``i0..stop-1`` were handled
    (``REFUSED``: request ``stop`` too, up to its decision, ``choice[stop]`` its server).
    """
    n = times.shape[0]
    n_servers = c0.shape[0]
    accepted = 0
    used0 = acc[0]
    used1 = acc[1]
    area0 = acc[2]
    area1 = acc[3]
    active_area = acc[4]
    why = DONE
    i = i0
    while i < n:
        t = times[i]
        rid = rid0 + i
        measured = rid >= warm_requests and t >= warm_time
        again = resume and i == i0  # the clock is already at it (after SAMPLE)
        if measured and not is_open and not again:
            why = HAND_OVER
            break
        if t > now and not again:
            now2 = now + (t - now)
            kid = next_id
            next_id += 1
            while size > 0:
                dt = ht[0]
                if not (dt < now2 or (dt == now2 and hid[0] < kid)):
                    break
                slot = hslot[0]
                size = _pop(ht, hid, hslot, size)
                s = dep_server[slot]
                a0 = dep_a0[slot]
                a1 = dep_a1[slot]
                v0 = c0[s] + a0
                v1 = c1[s] + a1
                c0[s] = v0 if v0 < k0[s] else k0[s]
                c1[s] = v1 if v1 < k1[s] else k1[s]
                used0 -= a0
                used1 -= a1
            now = now2
        if every > 0 and rid % every == 0 and not again:
            why = SAMPLE
            break
        if measured:
            util0[i] = used0 / cap0
            util1[i] = used1 / cap1
        e0 = d0[i]
        e1 = d1[i]
        t0 = e0 - eps
        t1 = e1 - eps
        s = -1
        for j in range(n_servers):
            if c0[j] >= t0 and c1[j] >= t1:
                s = j
                break
        choice[i] = s
        start[i] = now
        if s < 0:
            i += 1
            continue
        v0 = c0[s] - e0
        v1 = c1[s] - e1
        if v0 < -tol or v1 < -tol:
            why = REFUSED
            break
        c0[s] = v0 if v0 > 0.0 else 0.0
        c1[s] = v1 if v1 > 0.0 else 0.0
        end = now + dur[i]
        used0 += e0
        used1 += e1
        if is_open:
            span = end - now
            area0 += e0 * span
            area1 += e1 * span
            active_area += span
        accepted += 1
        slot = slot0 + i
        dep_server[slot] = s
        dep_a0[slot] = e0
        dep_a1[slot] = e1
        size = _push(ht, hid, hslot, size, end, next_id, slot)
        next_id += 1
        i += 1
    acc[0] = used0
    acc[1] = used1
    acc[2] = area0
    acc[3] = area1
    acc[4] = active_area
    return why, i, now, next_id, size, accepted
