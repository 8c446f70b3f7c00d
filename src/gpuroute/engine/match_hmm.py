"""The hidden Markov model of map matching (Newson and Krumm, "Hidden Markov Map Matching Through Noise and
Sparseness", ACM GIS 2009), as osrm-backend runs it (``routing_algorithms/map_matching.cpp``,
``map_matching/hidden_markov_model.hpp``): numba kernels over flat arrays, one trace at a time.

Arrays
------
A trace of ``n`` points has ``N`` candidates in all, point ``t``'s the rows ``cstart[t]:cstart[t + 1]``
(``cstart`` int64 (n + 1,); a point may have none). ``emis`` float64 (N,) is each candidate's emission log
probability (:func:`emission_log_prob`). A transition table between points ``p`` and ``t`` is float64
(|C_p| x |C_t|, row-major): the network distance in metres of the route from candidate ``p_i`` to ``t_j``,
``inf`` where there is none (or it is dearer than OSRM's bound, :func:`gpuroute.engine.services.match`).

Model
-----
* Emission: ``log N(d; 0, sigma)`` of the distance ``d`` (m) from the point to the candidate (sigma: the
  point's GPS precision, OSRM's ``radiuses``, default :data:`gpuroute.config.SERVE_MATCH_SIGMA_M`); the caller
  may lower it for a candidate (the match service does for U-turn candidates, ``UTURN_LOG_PENALTY``).
* Transition: ``log Exp(d_t; beta)``, ``d_t = |route distance - great-circle distance|`` between the two
  points; a transition with ``d_t >= max_distance_delta`` is impossible: with timestamps the step's time at
  ``max_speed``, at most OSRM's bound -- the trace's median sampling step (at least 1 s) at ``max_speed`` --, else
  2,000 m. (The step's time alone grows over the points a breakage drops and let a route after a breakage loop
  round the block: benchmarks/match_quality.py, a crawl through a Helsinki parking area matched 108 % long.)
* The points: a dense trace's grouped beyond the noise (:func:`noise_groups`, by the caller).
* Viterbi over the points in order from the last unbroken point; a point no candidate of the last unbroken
  one reaches is *broken* (dropped, and the one before it with it: OSRM's breakage); a gap (more than
  ``max_broken_time`` = 10 x the median sampling step between timestamps with ``gaps=split``, else more
  than 10 points since the last unbroken one) or a run of breakages that empties the unbroken stack splits
  the trace, and the model restarts at the split. Each sub-trace of two or more matched points is one
  matching; ``alternatives_count`` of a point is the number of its candidates some Viterbi path from a
  last candidate passes through, less one.

:func:`forward` is resumable: where the unbroken point before ``t`` is not ``t - 1`` (after a breakage) it
stops and asks for that table (status :data:`NEED_TABLE`), which the caller computes and hands back.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..crp.customize import edge_tail
from ..geo import EARTH_RADIUS_M
from ..geo.kernels import gc_metres
from ..geo.segments import project_one
from ..graph.heap import heap_pop, heap_push
from .legs import leg_pieces, summary_ids, turn_sums

__all__ = [
    "emission_log_prob",
    "forward",
    "reconstruct",
    "new_state",
    "new_states",
    "new_matchings",
    "viterbi_chunk",
    "viterbi_many",
    "viterbi_search_chunk",
    "viterbi_search_many",
    "flatten_matchings",
    "transitions",
    "transition_chunk",
    "new_scratch",
    "grid_cell",
    "sample_grid",
    "ball_samples",
    "candidate_pairs",
    "split_order",
    "candidate_rows",
    "leg_chunk",
    "leg_sums",
    "DONE",
    "NEED_TABLE",
    "NO_MATCH",
]

@intrinsic
def _fetch_add(typingctx, counter, index, value):
    """``counter[index] += value`` atomically (int64 array, sequentially consistent), in a compiled kernel: the
    value before. The parallel kernels' work queue: each worker takes the next item (:func:`next_item`)."""
    sig = types.int64(counter, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")

    return sig, codegen


@njit(cache=True, nogil=True)
def next_item(queue):
    """The next item of a work queue shared by a parallel kernel's workers (``queue`` int64 (1,), from 0): each
    call hands out the next index once, to one worker (an atomic fetch-and-add). Workers that take items until
    one is past the end balance unequal items dynamically (a static share each waits for its slowest)."""
    return _fetch_add(queue, 0, np.int64(1))


#: :func:`forward`'s statuses.
DONE, NEED_TABLE, NO_MATCH = 0, 1, 2
#: OSRM's ``INVALID_STATE``.
_INVALID = np.int64(-1)
_LOG_2PI = math.log(2.0 * math.pi)
#: Transition measure: |route - great-circle distance between the two candidates| (True), or between the two
#: GPS points (False, OSRM's).
CANDIDATE_GC = True
#: State scalars (:func:`new_state`'s ``sc``): next point, unbroken stack size, breakage begin, splits,
#: first initialised point, the table asked for (p, t).
_T, _NS, _BB, _NSP, _INIT, _ASK_P, _ASK_T = range(7)


@njit(cache=True)
def emission_log_prob(distance, sigma):
    """log of the normal density N(distance; 0, sigma) (OSRM's ``EmissionLogProbability``)."""
    z = distance / sigma
    return -0.5 * (_LOG_2PI + z * z) - math.log(sigma)


def new_state(n, N):
    """The Viterbi state of a trace of ``n`` points and ``N`` candidates, the tuple :func:`forward` and
    :func:`reconstruct` take: ``(sc, V, par, plen, pruned, brk, stack, splits)``, ``sc`` int64 (7,) the scalars
    (``sc[5], sc[6]``: the points of the table :func:`forward` asks for), ``V`` float64 (N,) log probabilities,
    ``par`` int64 (N,) parent candidate, ``plen`` float64 (N,) network distance from the parent (m), ``pruned``
    bool (N,), ``brk`` bool (n,) broken points, ``stack`` int64 (max(n, 1),) the unbroken points, ``splits``
    int64 (n + 2,)."""
    return (
        np.array([0, 0, -1, 0, -1, -1, -1], dtype=np.int64),
        np.full(N, -np.inf),
        np.zeros(N, dtype=np.int64),
        np.zeros(N),
        np.ones(N, dtype=np.bool_),
        np.ones(n, dtype=np.bool_),
        np.zeros(max(n, 1), dtype=np.int64),
        np.zeros(n + 2, dtype=np.int64),
    )


@njit(cache=True, nogil=True)
def far_neighbours(lon, lat, ptrace, reach, window, step):
    """For each point, the nearest point ``step`` (-1: before, +1: after) of the same trace that lies at least
    ``reach`` metres away (:func:`gpuroute.geo.kernels.gc_metres`), looking up to ``window`` points; int64 (n,),
    -1 where none (the U-turn rule of :func:`gpuroute.engine.services.match._allow_uturn`).

    lon, lat : float64 (n,) degrees; ptrace : int64 (n,) the trace of each point; reach : float64 (n,) m.
    """
    n = lon.size
    out = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for k in range(1, window + 1):
            j = i + step * k
            if j < 0 or j >= n or ptrace[j] != ptrace[i]:
                break
            if gc_metres(lon[i], lat[i], lon[j], lat[j]) >= reach[i]:
                out[i] = j
                break
    return out


@njit(cache=True, nogil=True)
def noise_groups(lon, lat, sigma, poff, sigmas, dense):
    """The points the model matches, as groups of points within the noise of each other (as Newson and Krumm
    2009, section 4, "remove points that are within 2 sigma_z of the previous included point"): int64 (n,), each
    point's group (ids from 0, ascending along the rows; no point is dropped). A group starts at a point at least
    ``sigmas`` standard deviations of the difference of two noisy points, ``sqrt(sigma_a**2 + sigma_b**2)`` (m),
    from the first point of the group before it (great circle, :func:`gpuroute.geo.kernels.gc_metres`) and holds
    the points after it nearer than that; each trace's first and last points are groups of their own, and its
    second point starts a group (the points within that distance of the ends are grouped as any others: dropping
    them, as before, left an end point alone to choose its road, and a gap of up to that distance beside it).
    Only a *dense* trace is grouped: one whose steps between consecutive points are mostly noise, its mean step
    driven -- estimated from the steps' mean square, less the noise's (``2 (sigma_a**2 + sigma_b**2)``: each
    point's noise is ``sigma`` per axis) -- under ``dense`` times the noise of a step's ends
    (``sqrt(sigma_a**2 + sigma_b**2)``, root mean square over the steps); in any other trace every point is a group
    of its own (a point near its predecessor there is a slow stretch, a corner, whose points pin the route).
    Trace ``k``'s points are rows ``poff[k]:poff[k + 1]`` (int64 (T + 1,)); lon, lat, sigma float64 (n,) (degrees,
    m).

    Why: a candidate is the point's projection on a road, and along the road two points' projections differ by
    the distance driven plus noise of that standard deviation: where the distance is within a few of them, the
    later projection often lies *behind* the earlier one, and the only route there is a loop round the block (or
    a breakage, or another road)."""
    n = lon.size
    grp = np.full(n, -1, dtype=np.int64)
    g = 0
    for k in range(poff.size - 1):
        a = poff[k]
        b = poff[k + 1]
        if b <= a:
            continue
        step2 = 0.0
        noise2 = 0.0
        for i in range(a + 1, b):
            d = gc_metres(lon[i - 1], lat[i - 1], lon[i], lat[i])
            step2 += d * d
            noise2 += sigma[i - 1] * sigma[i - 1] + sigma[i] * sigma[i]
        if step2 - 2.0 * noise2 >= dense * dense * noise2:  # sum over steps: driven^2 >= dense^2 noise^2
            for i in range(a, b):
                grp[i] = g
                g += 1
            continue
        grp[a] = g
        g += 1
        z = b - 1
        anchor = a
        for i in range(a + 1, z):  # the second point starts a group: the first and last stand alone
            if i == a + 1 or gc_metres(lon[anchor], lat[anchor], lon[i], lat[i]) >= sigmas * math.hypot(
                    sigma[anchor], sigma[i]):
                anchor = i
                grp[i] = g
                g += 1
            else:
                grp[i] = g - 1
        grp[z] = g
        g += 1
    return grp


@njit(cache=True)
def _clear(V, par, plen, pruned, brk, cstart, t0):
    n = cstart.size - 1
    for s in range(cstart[t0], cstart[n]):
        V[s] = -np.inf
        par[s] = 0
        plen[s] = 0.0
        pruned[s] = True
    for t in range(t0, n):
        brk[t] = True


@njit(cache=True)
def _initialize(V, par, pruned, brk, cstart, emis, t0):
    """OSRM's ``HiddenMarkovModel::initialize``: the first point from ``t0`` on with a candidate (its
    candidates seeded with their emissions), -1 where none is left before the last point."""
    n = cstart.size - 1
    t = t0
    while True:
        for s in range(cstart[t], cstart[t + 1]):
            V[s] = emis[s]
            par[s] = s
            pruned[s] = not (V[s] > -np.inf)
            brk[t] = brk[t] and pruned[s]
        t += 1
        if not (t < n and brk[t - 1]):
            break
    if t >= n:
        return _INVALID
    return t - 1


@njit(cache=True, nogil=True)
def forward(
    state,
    cstart,
    emis,
    lon,
    lat,
    clon,
    clat,
    ts,
    use_ts,
    split_gaps,
    max_speed,
    max_broken_time,
    max_broken_states,
    max_distance_delta,
    beta,
    toff,
    tdist,
    ask_dist,
):
    """The Viterbi pass of one trace (OSRM's ``mapMatching`` up to the reconstruction), resumable.

    Parameters
    ----------
    state : tuple
        The state (:func:`new_state`), updated in place.
    cstart : int64 (n + 1,)
    emis : float64 (N,)
    lon, lat : float64 (n,)
        The points (degrees).
    ts : float64 (n,)
        Timestamps (s; read where ``use_ts``).
    use_ts, split_gaps : bool
        Timestamps given; ``gaps=split``.
    max_speed : float
        m/s (with timestamps the transition's ``max_distance_delta`` is the step's time at this speed, at most
        OSRM's: the median sampling step -- the upper median of ``ts``'s steps, at least 1 s -- at this speed).
    max_broken_time : float
        Seconds (``gaps=split`` with timestamps).
    max_broken_states : int
        Points (a gap without timestamps).
    max_distance_delta : float
        Metres (without timestamps).
    beta : float
        Metres.
    toff : int64 (n,)
        Offset in ``tdist`` of the table between points ``t - 1`` and ``t`` (row-major), for ``t >= 1``; -1:
        not computed (asked for as after a breakage: :func:`viterbi_search_chunk` computes it then).
    tdist : float64
        The tables of consecutive points.
    ask_dist : float64
        The table asked for last (``sc`` holds its (p, t)), or empty.

    Returns
    -------
    int
        :data:`DONE`; :data:`NEED_TABLE` (the table between points ``sc[5]`` and ``sc[6]`` is needed: call
        again with it as ``ask_dist``); :data:`NO_MATCH` (no point to start from).
    """
    sc, V, par, plen, pruned, brk, stack, splits = state
    n = cstart.size - 1
    log_beta = math.log(beta)
    if sc[_INIT] < 0:  # first call
        _clear(V, par, plen, pruned, brk, cstart, 0)
        t0 = _initialize(V, par, pruned, brk, cstart, emis, 0)
        if t0 < 0:
            return NO_MATCH
        sc[_INIT] = t0
        sc[_NS] = 1
        stack[0] = t0
        sc[_T] = t0 + 1
        sc[_BB] = -1
        sc[_NSP] = 0
    t = sc[_T]
    ns = sc[_NS]
    bb = sc[_BB]
    nsp = sc[_NSP]
    median_delta = max_distance_delta
    if use_ts and n > 1:  # OSRM's: the median sampling step (the upper median, at least 1 s) at max_speed
        steps = np.sort(np.diff(ts))
        median_delta = max(1.0, steps[steps.size // 2]) * max_speed
    while t < n:
        p = stack[ns - 1]
        if use_ts:
            step_time = ts[t] - ts[p]
            max_delta = min(step_time * max_speed, median_delta)
        else:
            step_time = 1.0
            max_delta = max_distance_delta
        if use_ts and split_gaps:
            gap = step_time > max_broken_time
        else:
            gap = t - p > max_broken_states
        if not gap:
            nt = cstart[t + 1] - cstart[t]
            if p == t - 1 and toff[t] >= 0:
                D = tdist[toff[t] : toff[t] + (cstart[p + 1] - cstart[p]) * nt]
            elif sc[_ASK_P] == p and sc[_ASK_T] == t and ask_dist.size == (cstart[p + 1] - cstart[p]) * nt:
                D = ask_dist
            else:
                sc[_T] = t
                sc[_NS] = ns
                sc[_BB] = bb
                sc[_NSP] = nsp
                sc[_ASK_P] = p
                sc[_ASK_T] = t
                return NEED_TABLE
            hav = gc_metres(lon[p], lat[p], lon[t], lat[t])
            c0 = cstart[p]
            for s in range(cstart[p], cstart[p + 1]):
                if pruned[s]:
                    continue
                for j in range(nt):
                    s2 = cstart[t] + j
                    new = V[s] + emis[s2]
                    if V[s2] > new:
                        continue
                    d = D[(s - c0) * nt + j]
                    if CANDIDATE_GC:
                        dt = abs(d - gc_metres(clon[s], clat[s], clon[s2], clat[s2]))
                    else:
                        dt = abs(d - hav)
                    if not (dt < max_delta):  # also inf / NaN: no route
                        continue
                    new += -log_beta - dt / beta
                    if new > V[s2]:
                        V[s2] = new
                        par[s2] = s
                        plen[s2] = d
                        pruned[s2] = False
                        brk[t] = False
            if brk[t]:
                if bb < 0 or t < bb:
                    bb = t
                ns -= 1
            else:
                stack[ns] = t
                ns += 1
        if ns == 0 or gap:
            si = t
            if bb >= 0:
                si = bb
                bb = -1
            splits[nsp] = si
            nsp += 1
            _clear(V, par, plen, pruned, brk, cstart, si)
            t_new = _initialize(V, par, pruned, brk, cstart, emis, si)
            if t_new < 0:
                break
            ns = 1
            stack[0] = t_new
            t = t_new
        t += 1
    if ns > 0:
        splits[nsp] = stack[ns - 1] + 1
        nsp += 1
    sc[_T] = n
    sc[_NS] = ns
    sc[_BB] = bb
    sc[_NSP] = nsp
    return DONE


@njit(cache=True, nogil=True)
def reconstruct(state, cstart, cpoint, lon, lat):
    """The matchings of a finished :func:`forward` (OSRM's reconstruction) from its state (:func:`new_state`).

    Returns
    -------
    m_off : int64 (k + 1,)
        Matching ``i``'s matched points are rows ``m_off[i]:m_off[i + 1]`` of the next three.
    m_point, m_cand, m_alt : int64 (r,)
        Point index, chosen candidate, ``alternatives_count``.
    m_route, m_trace : float64 (k,)
        Sum of the network distances between consecutive matched points (m), and of their great-circle
        distances (the two lengths of OSRM's confidence).
    """
    sc, V, par, plen, pruned, brk, _stack, splits = state
    n = cstart.size - 1
    N = cstart[n]
    reach = np.zeros(N, dtype=np.bool_)
    nsp = sc[_NSP]
    m_off = np.zeros(nsp + 1, dtype=np.int64)
    m_point = np.zeros(n, dtype=np.int64)
    m_cand = np.zeros(n, dtype=np.int64)
    m_alt = np.zeros(n, dtype=np.int64)
    m_route = np.zeros(nsp)
    m_trace = np.zeros(nsp)
    seq_t = np.zeros(n, dtype=np.int64)
    seq_c = np.zeros(n, dtype=np.int64)
    k = 0
    r = 0
    begin = sc[_INIT]
    for i in range(nsp):
        end = splits[i]
        pti = end - 1
        while pti >= begin and brk[pti]:
            pti -= 1
        while begin < end and brk[begin]:
            begin += 1
        last = pti
        if pti - begin + 1 < 2:
            begin = end
            continue
        pci = cstart[pti]
        for s in range(cstart[pti], cstart[pti + 1]):
            if V[s] > V[pci]:
                pci = s
        L = 0
        while pti > begin:
            seq_t[L] = pti
            seq_c[L] = pci
            L += 1
            reach[pci] = True
            nxt = par[pci]
            nt = cpoint[nxt]
            if pti == nt:
                break
            pti = nt
            pci = nxt
        seq_t[L] = pti
        seq_c[L] = pci
        L += 1
        reach[pci] = True
        if L < 2:
            begin = end
            continue
        for s_last in range(cstart[last], cstart[last + 1]):
            pti = last
            pci = s_last
            while pti > begin:
                if reach[pci] or pruned[pci]:
                    break
                reach[pci] = True
                nxt = par[pci]
                pti = cpoint[nxt]
                pci = nxt
            reach[pci] = True
        mdist = 0.0
        tdist = 0.0
        for j in range(L - 1, -1, -1):  # seq is last first
            tt = seq_t[j]
            cc = seq_c[j]
            m_point[r] = tt
            m_cand[r] = cc
            cnt = 0
            for s in range(cstart[tt], cstart[tt + 1]):
                if reach[s]:
                    cnt += 1
            m_alt[r] = cnt - 1
            mdist += plen[cc]
            if j < L - 1:
                tp = seq_t[j + 1]
                tdist += gc_metres(lon[tp], lat[tp], lon[tt], lat[tt])
            r += 1
        m_route[k] = mdist
        m_trace[k] = tdist
        k += 1
        m_off[k] = r
        begin = end
    return m_off[: k + 1], m_point[:r], m_cand[:r], m_alt[:r], m_route[:k], m_trace[:k]


# ------------------------------------------------------------------------------------------ many traces
# The traces of one call side by side (:func:`viterbi_chunk`, :func:`viterbi_many`), as tuples of flat arrays:
#   ``trace = (poff, cstart, cpoint, emis, lon, lat, clon, clat, ts, use_ts, split_gaps)``: trace ``k``'s points
#       are rows ``poff[k]:poff[k + 1]`` (int64 (T + 1,)) of ``lon``, ``lat``, ``ts`` (float64 (n,): degrees, seconds;
#       ``ts`` read where ``use_ts[k]``), point ``i``'s candidates rows ``cstart[i]:cstart[i + 1]`` (int64 (n + 1,))
#       of ``emis``, ``clon``, ``clat`` (float64 (N,)) and ``cpoint`` (int64 (N,): their points);
#       ``use_ts``, ``split_gaps`` bool (T,);
#   ``hmm = (max_speed, max_broken_states, max_distance_delta, beta)``: :func:`forward`'s scalars;
#   ``tabs = (toff, tdist, ask_off, ask_dist)``: ``tdist`` float64 the tables of every trace's consecutive points,
#       ``toff`` int64 (n,): the table between points ``i - 1`` and ``i`` (rows of one trace) starts at
#       ``tdist[toff[i]]``; the table each trace asked for last is ``ask_dist[ask_off[k]:ask_off[k + 1]]``;
#   ``state``: :func:`new_state`'s arrays of every trace (:func:`new_states`);
#   ``out = (m_off, m_point, m_cand, m_alt, m_route, m_trace, nm, nr)``: :func:`reconstruct`'s arrays of trace
#       ``k`` at ``m_off[poff[k] + k:]`` (its ``nm[k] + 1`` entries), ``m_point``, ``m_cand``, ``m_alt`` at ``poff[k]``
#       (``nr[k]`` rows; points and candidates from 0 within the trace), ``m_route``, ``m_trace`` at ``poff[k]``.
def new_states(T, n, N):
    """:func:`new_state` of ``T`` traces of ``n`` points and ``N`` candidates in all (rows as the section notes
    say): ``(sc (T, 7), V (N,), par (N,), plen (N,), pruned (N,), brk (n,), stack (n + T,), splits (n + 2T,))``."""
    sc = np.zeros((T, 7), dtype=np.int64)
    sc[:, 2] = -1
    sc[:, 4:] = -1
    return (
        sc,
        np.full(N, -np.inf),
        np.zeros(N, dtype=np.int64),
        np.zeros(N),
        np.ones(N, dtype=np.bool_),
        np.ones(n, dtype=np.bool_),
        np.zeros(n + T, dtype=np.int64),
        np.zeros(n + 2 * T, dtype=np.int64),
    )


def new_matchings(T, n):
    """The ``out`` buffers of :func:`viterbi_many` for ``T`` traces of ``n`` points in all (the section notes):
    int64 (n + T,), int64 (n,) three times, float64 (n,) twice, int64 (T,) twice."""
    z = np.zeros
    return (z(n + T, dtype=np.int64), z(n, dtype=np.int64), z(n, dtype=np.int64), z(n, dtype=np.int64), z(n), z(n),
            z(T, dtype=np.int64), z(T, dtype=np.int64))


@njit(cache=True, nogil=True)
def _forward_one(k, trace, hmm, toff, tdist, state, ask):
    """:func:`forward` of trace ``k`` (resumed where it stopped) on its rows of the section notes' arrays, with
    ``ask`` the table it asked for last (or empty): its status."""
    poff, cstart, cpoint, emis, lon, lat, clon, clat, ts, use_ts, split_gaps = trace
    max_speed, max_broken_states, max_distance_delta, beta = hmm
    sc, V, par, plen, pruned, brk, stack, splits = state
    a = poff[k]
    b = poff[k + 1]
    ca = cstart[a]
    cb = cstart[b]
    if use_ts[k]:  # 10 median sampling steps (the upper median of an even count, as np.partition's)
        d = np.sort(np.diff(ts[a:b]))
        max_broken = max(1.0, d[d.size // 2]) * max_broken_states
    else:
        max_broken = float(max_broken_states)
    st = (sc[k], V[ca:cb], par[ca:cb], plen[ca:cb], pruned[ca:cb], brk[a:b], stack[a + k : b + k + 1],
          splits[a + 2 * k : b + 2 * k + 2])
    cs = cstart[a : b + 1] - ca  # the trace's own, from 0
    return forward(st, cs, emis[ca:cb], lon[a:b], lat[a:b], clon[ca:cb], clat[ca:cb], ts[a:b], use_ts[k],
                   split_gaps[k], max_speed, max_broken, max_broken_states, max_distance_delta, beta, toff[a:b],
                   tdist, ask)


@njit(cache=True, nogil=True)
def _reconstruct_one(k, trace, state, out):
    """:func:`reconstruct` of the finished trace ``k``, written to ``out`` (the section notes)."""
    poff, cstart, cpoint, emis, lon, lat, clon, clat, ts, use_ts, split_gaps = trace
    sc, V, par, plen, pruned, brk, stack, splits = state
    m_off, m_point, m_cand, m_alt, m_route, m_trace, nm, nr = out
    a = poff[k]
    b = poff[k + 1]
    ca = cstart[a]
    cb = cstart[b]
    st = (sc[k], V[ca:cb], par[ca:cb], plen[ca:cb], pruned[ca:cb], brk[a:b], stack[a + k : b + k + 1],
          splits[a + 2 * k : b + 2 * k + 2])
    cs = cstart[a : b + 1] - ca
    r_off, r_point, r_cand, r_alt, r_route, r_trace = reconstruct(st, cs, cpoint[ca:cb] - a, lon[a:b], lat[a:b])
    km = r_route.size
    r = r_point.size
    nm[k] = km
    nr[k] = r
    for j in range(km + 1):
        m_off[a + k + j] = r_off[j]
    for j in range(r):
        m_point[a + j] = r_point[j]
        m_cand[a + j] = r_cand[j]
        m_alt[a + j] = r_alt[j]
    for j in range(km):
        m_route[a + j] = r_route[j]
        m_trace[a + j] = r_trace[j]


@njit(cache=True, nogil=True)
def viterbi_chunk(lo, hi, step, todo, trace, hmm, tabs, state, out, status):
    """Traces ``todo[lo], todo[lo + step], ...`` (below ``hi``) of :func:`viterbi_many`, serially: each one's
    :func:`forward` (resumed where it stopped) and, where it is done, its :func:`reconstruct` written to ``out``;
    ``status[k]`` :func:`forward`'s status. The arrays are the section notes'."""
    toff, tdist, ask_off, ask_dist = tabs
    for i in range(lo, hi, step):
        k = todo[i]
        s = _forward_one(k, trace, hmm, toff, tdist, state, ask_dist[ask_off[k] : ask_off[k + 1]])
        status[k] = s
        if s == DONE:
            _reconstruct_one(k, trace, state, out)


@njit(cache=True, nogil=True)
def viterbi_search_chunk(lo, hi, step, todo, trace, hmm, tabs, state, out, status, steps, opts, net, ws):
    """:func:`viterbi_chunk` with the tables of consecutive points searched here, as the pass asks for them
    (``tabs``' ``toff`` -1 there), and only the rows it reads: a source candidate the Viterbi pruned (no path
    reaches it) is not searched (its row is ``inf``, never read); so are the tables asked for after a breakage,
    up to ``K`` points back. Each row is :func:`_search`'s from that source to point ``t``'s candidates within
    ``steps = (bound, lmax)`` (float64 (n, K) twice: of the table between points ``t - b`` and ``t`` at ``[t, b -
    1]``; metric units and metres, as :func:`transitions`' pairs), on one worker's scratch ``ws``
    (:func:`transition_chunk`'s): the rows :func:`transitions` would compute, to the bit. A trace that asks for a
    table farther back, or whose search ran out of heap, is left at :data:`NEED_TABLE` for the caller
    (:func:`viterbi_chunk`'s contract)."""
    tb, buf = _viterbi_buffers(trace[1], opts)
    for i in range(lo, hi, step):
        _viterbi_search_one(todo[i], trace, hmm, tabs, state, out, status, steps, opts, net, ws, tb, buf)


@njit(cache=True, nogil=True)
def _viterbi_buffers(cstart, opts):
    """One worker's target buffers (:func:`_target_buffers`, every point's candidates) and table buffer (the
    widest table) for :func:`_viterbi_search_one`."""
    n = cstart.size - 1
    tb = _target_buffers(cstart[:n], cstart[1:], opts[0])
    return tb, np.empty(tb[1].size * tb[1].size)


@njit(cache=True, nogil=True)
def _viterbi_search_one(k, trace, hmm, tabs, state, out, status, steps, opts, net, ws, tb, buf):
    """Trace ``k`` of :func:`viterbi_search_chunk` on one worker's scratch ``ws`` and buffers ``tb``, ``buf``
    (:func:`_viterbi_buffers`)."""
    poff, cstart = trace[0], trace[1]
    toff, tdist, ask_off, ask_dist = tabs
    sc, pruned = state[0], state[4]
    step_bound, step_lmax = steps
    blen = tb[2]
    a = poff[k]
    ask = ask_dist[ask_off[k] : ask_off[k + 1]]
    while True:
        s = _forward_one(k, trace, hmm, toff, tdist, state, ask)
        if s != NEED_TABLE:
            break
        p = a + sc[k, _ASK_P]
        t = a + sc[k, _ASK_T]
        back = t - p
        if back > step_bound.shape[1]:  # farther back than the steps given: the caller's
            break
        bound = step_bound[t, back - 1]
        lmax = step_lmax[t, back - 1]
        s0 = cstart[p]
        s1 = cstart[p + 1]
        t0 = cstart[t]
        t1 = cstart[t + 1]
        nt = t1 - t0
        D = buf[: (s1 - s0) * nt]
        good = True
        for src in range(s0, s1):
            row = (src - s0) * nt
            if pruned[src] or nt == 0:  # a row forward never reads
                for j in range(nt):
                    D[row + j] = np.inf
                continue
            if not _search(src, t0, t1, bound, lmax, opts, net, ws, tb):
                good = False
                break
            for j in range(nt):
                D[row + j] = blen[j]
        if not good:  # a search ran out of heap: the caller computes this table another way
            break
        ask = D
    status[k] = s
    if s == DONE:
        _reconstruct_one(k, trace, state, out)


@njit(cache=True, nogil=True)
def _viterbi_search_worker(queue, todo, trace, hmm, tabs, state, out, status, steps, opts, net, ws):
    """One worker of :func:`viterbi_search_many`: the traces ``todo[next_item(queue)]`` until none is left."""
    tb, buf = _viterbi_buffers(trace[1], opts)
    while True:
        i = next_item(queue)
        if i >= todo.size:
            break
        _viterbi_search_one(todo[i], trace, hmm, tabs, state, out, status, steps, opts, net, ws, tb, buf)


@njit(cache=True, parallel=True, nogil=True)
def viterbi_search_many(W, todo, trace, hmm, tabs, state, out, status, steps, opts, net, scratch):
    """:func:`viterbi_search_chunk` of every trace of ``todo`` (int64), ``prange`` over ``W`` workers, one per row
    of ``scratch`` (:func:`new_scratch`). Each worker takes the next trace of ``todo`` in order as it is free (a
    work queue, :func:`next_item`; the caller lists the dearest first): traces of unequal cost keep every worker
    busy to the end (a static share each -- ``todo[w], todo[w + W], ...`` -- waited for its slowest). A trace's
    answer does not depend on the worker that runs it (each scratch row is left clean)."""
    queue = np.zeros(1, dtype=np.int64)
    for w in prange(W):
        _viterbi_search_worker(queue, todo, trace, hmm, tabs, state, out, status, steps, opts, net, _row(scratch, w))


@njit(cache=True)
def flatten_matchings(poff, cstart, out):
    """:func:`viterbi_many`'s ``out`` of every trace as flat rows, in trace order: ``(row_point, row_cand,
    row_alt, mbase, m_r0, m_r1, m_route, m_trace)``: int64 (R,) the matched points and candidates (rows of the
    call's arrays) and ``alternatives_count``; int64 (T,) trace ``k``'s first matching; int64 (M,) twice, matching
    ``i``'s rows ``m_r0[i]:m_r1[i]``; float64 (M,) twice, its route and trace lengths (m)."""
    m_off, m_point, m_cand, m_alt, m_route, m_trace, nm, nr = out
    T = nm.size
    R = 0
    M = 0
    for k in range(T):
        R += nr[k]
        M += nm[k]
    row_point = np.empty(R, dtype=np.int64)
    row_cand = np.empty(R, dtype=np.int64)
    row_alt = np.empty(R, dtype=np.int64)
    mbase = np.empty(T, dtype=np.int64)
    m_r0 = np.empty(M, dtype=np.int64)
    m_r1 = np.empty(M, dtype=np.int64)
    o_route = np.empty(M)
    o_trace = np.empty(M)
    r = 0
    i = 0
    for k in range(T):
        a = poff[k]
        ca = cstart[a]
        mbase[k] = i
        for j in range(nm[k]):
            m_r0[i] = r + m_off[a + k + j]
            m_r1[i] = r + m_off[a + k + j + 1]
            o_route[i] = m_route[a + j]
            o_trace[i] = m_trace[a + j]
            i += 1
        for j in range(nr[k]):
            row_point[r] = a + m_point[a + j]
            row_cand[r] = ca + m_cand[a + j]
            row_alt[r] = m_alt[a + j]
            r += 1
    return row_point, row_cand, row_alt, mbase, m_r0, m_r1, o_route, o_trace


@njit(cache=True, parallel=True, nogil=True)
def viterbi_many(W, todo, trace, hmm, tabs, state, out, status):
    """:func:`viterbi_chunk` of every trace of ``todo`` (int64), ``prange`` over ``W`` workers (worker ``w`` takes
    traces ``todo[w], todo[w + W], ...``); each trace's arrays are its own rows (the section notes)."""
    for w in prange(W):
        viterbi_chunk(w, todo.size, W, todo, trace, hmm, tabs, state, out, status)


#: :func:`sample_grid`'s keys: a cell's index along each axis, offset by this (a power of two above
#: ``EARTH_RADIUS_M`` / :data:`_GRID_MIN_M`), packed in 21 bits each.
_GRID_OFF = 1 << 20
_GRID_MIN_M = 8.0


def grid_cell(h):
    """The cell size (m) :func:`sample_grid` and :func:`ball_samples` use for a wanted size ``h``: at least
    :data:`_GRID_MIN_M`."""
    return max(float(h), _GRID_MIN_M)


def sample_grid(xyz, h):
    """A uniform grid of cube cells of ``h`` metres over points ``xyz`` float64 (S, 3) (m, Earth-centred, as a
    segment index's k-d tree holds its samples), for :func:`ball_samples`: ``(keys, start, order)``, the occupied
    cells' keys ascending (int64 (C,)), and the points of cell ``c``: ``order[start[c]:start[c + 1]]`` (int64)."""
    ijk = np.floor(np.asarray(xyz, dtype=np.float64) / grid_cell(h)).astype(np.int64) + _GRID_OFF
    key = (ijk[:, 0] << 42) | (ijk[:, 1] << 21) | ijk[:, 2]
    order = np.argsort(key, kind="stable")
    keys, first = np.unique(key[order], return_index=True)
    start = np.append(first, order.size).astype(np.int64)
    return keys, start, order.astype(np.int64)


@njit(cache=True, nogil=True)
def _ball_pass(q, r, xyz, h, keys, start, order, lens, cum, out):
    """One pass of :func:`ball_samples`: the counts into ``lens`` (``out`` empty), or the samples into ``out``
    from ``cum[i]``."""
    fill = out.size > 0
    for i in range(q.shape[0]):
        rr = r[i] * r[i]
        c = 0
        x0 = int(math.floor((q[i, 0] - r[i]) / h))
        x1 = int(math.floor((q[i, 0] + r[i]) / h))
        y0 = int(math.floor((q[i, 1] - r[i]) / h))
        y1 = int(math.floor((q[i, 1] + r[i]) / h))
        z0 = int(math.floor((q[i, 2] - r[i]) / h))
        z1 = int(math.floor((q[i, 2] + r[i]) / h))
        for ix in range(x0, x1 + 1):
            for iy in range(y0, y1 + 1):
                for iz in range(z0, z1 + 1):
                    key = ((ix + _GRID_OFF) << 42) | ((iy + _GRID_OFF) << 21) | (iz + _GRID_OFF)
                    at = np.searchsorted(keys, key)
                    if at >= keys.size or keys[at] != key:
                        continue
                    for e in range(start[at], start[at + 1]):
                        s = order[e]
                        dx = xyz[s, 0] - q[i, 0]
                        dy = xyz[s, 1] - q[i, 1]
                        dz = xyz[s, 2] - q[i, 2]
                        if dx * dx + dy * dy + dz * dz <= rr:
                            if fill:
                                out[cum[i] + c] = s
                            c += 1
        if not fill:
            lens[i] = c


@njit(cache=True, nogil=True)
def ball_samples(q, r, xyz, h, keys, start, order):
    """The samples within ``r[i]`` metres (straight line) of each point ``q[i]`` (float64 (k, 3), m,
    Earth-centred; ``r`` float64 (k,)), found through :func:`sample_grid`'s cells (``keys, start, order``, of
    ``h`` metres: :func:`grid_cell`) over the samples ``xyz`` float64 (S, 3): ``(lens, samples)``, int64, as
    ``cKDTree.query_ball_point`` gives them flattened (point ``i``'s ``lens[i]`` samples next, in no set order).
    Serial, without the GIL (callers run chunks of points on threads)."""
    k = q.shape[0]
    lens = np.zeros(k, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    _ball_pass(q, r, xyz, h, keys, start, order, lens, none, none)
    cum = np.zeros(k + 1, dtype=np.int64)
    for i in range(k):
        cum[i + 1] = cum[i] + lens[i]
    out = np.empty(cum[k], dtype=np.int64)
    if out.size:
        _ball_pass(q, r, xyz, h, keys, start, order, lens, cum, out)
    return lens, out


@njit(cache=True, nogil=True)
def split_order(pt, dist, both):
    """The order of the candidates ``[originals, copies]`` (the originals' rows, then a copy of each row where
    ``both``) by point, then distance, then that position -- ``np.lexsort((arange, dist, pt))`` of the
    concatenation -- by one merge per point: ``pt`` int64 (k,) non-decreasing and ``dist`` float64 (k,)
    non-decreasing within a point (as :func:`candidate_pairs` gives them, not NaN), ``both`` bool (k,). Returns
    int64 (k + both.sum(),)."""
    k = pt.size
    cp = np.empty(k, dtype=np.int64)  # the copies' rows in order, and their positions after the originals
    nc = 0
    for i in range(k):
        if both[i]:
            cp[nc] = i
            nc += 1
    order = np.empty(k + nc, dtype=np.int64)
    i = 0
    j = 0
    o = 0
    while i < k or j < nc:
        if j >= nc:
            take_orig = True
        elif i >= k:
            take_orig = False
        else:
            a = cp[j]
            take_orig = pt[i] < pt[a] or (pt[i] == pt[a] and dist[i] <= dist[a])
        if take_orig:
            order[o] = i
            i += 1
        else:
            order[o] = k + j
            j += 1
        o += 1
    return order


@njit(cache=True, nogil=True)
def candidate_rows(pt, seg, f, fwd, rev, both, order, name_id):
    """The candidates and their PhantomSet rows from the projections kept (``pt``, ``seg`` int64 (k,), ``f``
    float64 (k, 5) as :func:`candidate_pairs` gives them; ``fwd``, ``rev`` int64 (k,) the segment's usable
    forward and reverse arcs, -1 none), a copy of each row where ``both`` (bool (k,): split into a forward-only
    candidate and a reverse-only copy), in ``order`` (:func:`split_order`).

    Returns
    -------
    c_pt, c_seg : int64 (N,)
        Each candidate's point and segment.
    c_f : float64 (N, 5)
    c_fwd, c_rev : int64 (N,)
        Its forward and reverse arcs (-1 none).
    start : int64 (N + 1,)
        Candidate ``c``'s options (PhantomSet rows): ``start[c]:start[c + 1]``, forward before reverse.
    row_c : int64 (r,)
        The candidate of each row.
    arc, segment, name : int32 (r,)
    fraction, segment_fraction, lon, lat : float64 (r,)
        Position along the arc and along the segment, the snapped point (degrees).
    """
    k = pt.size
    cp = np.empty(k, dtype=np.int64)  # the row each copy is of
    nb = 0
    for i in range(k):
        if both[i]:
            cp[nb] = i
            nb += 1
    N = k + nb
    c_pt = np.empty(N, dtype=np.int64)
    c_seg = np.empty(N, dtype=np.int64)
    c_f = np.empty((N, 5))
    c_fwd = np.empty(N, dtype=np.int64)
    c_rev = np.empty(N, dtype=np.int64)
    start = np.zeros(N + 1, dtype=np.int64)
    for o in range(N):
        src = order[o]
        if src < k:
            i = src
            fw = fwd[i]
            rv = -1 if both[i] else rev[i]
        else:
            i = cp[src - k]
            fw = -1
            rv = rev[i]
        c_pt[o] = pt[i]
        c_seg[o] = seg[i]
        for j in range(5):
            c_f[o, j] = f[i, j]
        c_fwd[o] = fw
        c_rev[o] = rv
        start[o + 1] = start[o] + (fw >= 0) + (rv >= 0)
    r = start[N]
    row_c = np.empty(r, dtype=np.int64)
    arc = np.empty(r, dtype=np.int32)
    segment = np.empty(r, dtype=np.int32)
    name = np.empty(r, dtype=np.int32)
    fraction = np.empty(r)
    segment_fraction = np.empty(r)
    lon = np.empty(r)
    lat = np.empty(r)
    for c in range(N):
        for q in range(start[c], start[c + 1]):
            is_rev = q > start[c] or c_fwd[c] < 0
            row_c[q] = c
            arc[q] = c_rev[c] if is_rev else c_fwd[c]
            fs = c_f[c, 0]
            fraction[q] = 1.0 - fs if is_rev else fs
            segment_fraction[q] = fs
            segment[q] = c_seg[c]
            name[q] = name_id[c_seg[c]]
            lon[q] = c_f[c, 3]
            lat[q] = c_f[c, 4]
    return c_pt, c_seg, c_f, c_fwd, c_rev, start, row_c, arc, segment, name, fraction, segment_fraction, lon, lat


@njit(cache=True, nogil=True)
def candidate_pairs(lon, lat, radius, lens, samples, sample_segment, lon_u, lat_u, lon_v, lat_v):
    """Exact projections of each point onto the segments of its ball's samples, those within its radius
    kept, each segment once per point: ``(point, segment, fraction, distance, bearing, slon, slat)`` arrays
    (points in order; a point's segments by distance, then id). ``lens`` (k,) the samples of each ball in
    ``samples``. The projection is :mod:`gpuroute.geo.segments`' (local frame around the point)."""
    k = lon.size
    total = 0
    most = 1
    for i in range(k):
        total += lens[i]
        most = max(most, lens[i])
    o_pt = np.empty(total, dtype=np.int64)
    o_seg = np.empty(total, dtype=np.int64)
    o_f = np.empty((total, 5))
    segs = np.empty(most, dtype=np.int64)  # one point's segments, reused: sorted and deduplicated in place
    m = 0
    pos = 0
    deg = math.pi / 180.0
    for i in range(k):
        c = lens[i]
        for j in range(c):  # insertion sort (a ball holds a few dozen samples), then unique: np.unique's
            g = sample_segment[samples[pos + j]]
            x = j
            while x > 0 and segs[x - 1] > g:
                segs[x] = segs[x - 1]
                x -= 1
            segs[x] = g
        pos += c
        u = 0
        for j in range(c):
            if u == 0 or segs[j] != segs[u - 1]:
                segs[u] = segs[j]
                u += 1
        kx = deg * EARTH_RADIUS_M * math.cos(lat[i] * deg)
        ky = deg * EARTH_RADIUS_M
        m0 = m
        for j in range(u):
            g = segs[j]
            res = project_one(lon[i], lat[i], kx, ky, lon_u[g], lat_u[g], lon_v[g], lat_v[g])
            if res[1] <= radius[i]:
                # by distance, stable (segment id among equals): insertion into the rows of this point
                x = m
                while x > m0 and o_f[x - 1, 1] > res[1]:
                    o_pt[x] = o_pt[x - 1]
                    o_seg[x] = o_seg[x - 1]
                    for f in range(5):
                        o_f[x, f] = o_f[x - 1, f]
                    x -= 1
                o_pt[x] = i
                o_seg[x] = g
                o_f[x, 0] = res[0]
                o_f[x, 1] = res[1]
                o_f[x, 2] = res[2]
                o_f[x, 3] = res[4]
                o_f[x, 4] = res[5]
                m += 1
    return o_pt[:m], o_seg[:m], o_f[:m]


# ------------------------------------------------------------------------------------------ transitions
# The searches' inputs travel as tuples (numba types each one by its elements):
#   ``opts = (ostart, oarc, ofrac)``: the candidates' options (the rows of a PhantomSet: candidate ``c``'s are
#       ``ostart[c]:ostart[c + 1]``, each an arc ``oarc`` (int64) and the fraction ``ofrac`` along it);
#   ``net = (first, out_arc, tcost, cost, length, minpen)``: the turn-expanded metric (turns of arc ``a`` are
#       ``first[a]:first[a + 1]`` onto ``out_arc``, costing ``tcost``: penalty + the out-arc's cost, < 0
#       forbidden; ``cost`` (m,) metric units, ``length`` (m,) metres; ``minpen`` <= 0 the least turn penalty,
#       ``tcost`` less the out-arc's cost, of any allowed turn);
#   ``ws = (label, llab, tmark, touched, parc, hd, hn)``: one worker's scratch (a row of :func:`new_scratch`'s
#       arrays, clean on entry and left clean by every search but ``parc``, the parents).
@njit(cache=True)
def _search(s, t0, t1, bound, lmax, opts, net, ws, tb):
    """The one bounded search of the transitions and of the legs (OSRM's ``getNetworkDistance`` with its
    weight bound): a turn-expanded Dijkstra on arcs from candidate ``s``'s options until every candidate of
    ``t0:t1`` is final or the bound (metric units) is passed; arcs whose route is longer than ``lmax`` metres are
    not expanded (the HMM cannot use such a route). Writes the target buffers ``tb = (tnext, best, blen, bjoin,
    brow)`` (:func:`_target_buffers`): ``best``/``blen`` (t1 - t0,) the weight-optimal route's cost and length
    (inf: none within the bound and ``lmax``), ``bjoin``/``brow`` the arc before the target's arc on it (``-1 -
    q``: on source option ``q``'s own arc) and the target option row reached; and ``parc`` (m,) of ``ws``: the
    arc each arc labelled was reached from (``-1 - q`` where seeded by source option row ``q``). Returns False
    where the heap ran full (the results are then incomplete)."""
    ostart, oarc, ofrac = opts
    first, out_arc, tcost, cost, length, minpen = net
    label, llab, tmark, touched, parc, hd, hn = ws
    tnext, best, blen, bjoin, brow = tb
    nt = t1 - t0
    for j in range(nt):
        best[j] = np.inf
        blen[j] = np.inf
    # target options by arc (a linked list per arc through tnext, indexed by option row)
    r0 = ostart[t0]
    r1 = ostart[t1]
    for r in range(r0, r1):
        a = oarc[r]
        tnext[r - r0] = tmark[a]
        tmark[a] = r
    # the same-arc leg: a target ahead on a source option's arc
    for q in range(ostart[s], ostart[s + 1]):
        a = oarc[q]
        fa = ofrac[q]
        r = tmark[a]
        while r >= 0:
            if ofrac[r] >= fa:
                j = edge_tail(ostart, t0, t1, r) - t0
                v = (ofrac[r] - fa) * cost[a]
                if v < best[j]:
                    best[j] = v
                    blen[j] = (ofrac[r] - fa) * length[a]
                    bjoin[j] = -1 - q
                    brow[j] = r
            r = tnext[r - r0]
    k = 0
    size = 0
    for q in range(ostart[s], ostart[s + 1]):
        a = oarc[q]
        d = (1.0 - ofrac[q]) * cost[a]
        if d < label[a]:
            if label[a] == np.inf:
                touched[k] = a
                k += 1
            label[a] = d
            llab[a] = (1.0 - ofrac[q]) * length[a]
            parc[a] = -1 - q
            if size >= hd.size:
                size = -1
                break
            size = heap_push(hd, hn, size, d, a)
    worst = 0.0
    dirty = True  # worst (the largest best) is recomputed only after a best changed
    while size > 0:
        d, x, size = heap_pop(hd, hn, size)
        if d > label[x]:
            continue
        if d > bound:
            break
        if dirty:
            worst = 0.0
            for j in range(nt):
                if best[j] > worst:
                    worst = best[j]
            dirty = False
        if d + minpen >= worst:  # every target final (a turn costs its out-arc plus at least minpen)
            break
        if llab[x] > lmax:  # every route through x is longer than any transition can use
            continue
        for e in range(first[x], first[x + 1]):
            tc = tcost[e]
            if tc < 0:
                continue
            y = out_arc[e]
            nd = d + tc
            r = tmark[y]
            while r >= 0:  # the relaxation-time join: a target on the arc turned into
                j = edge_tail(ostart, t0, t1, r) - t0
                v = nd - cost[y] + ofrac[r] * cost[y]
                if v < best[j]:
                    best[j] = v
                    blen[j] = llab[x] + ofrac[r] * length[y]
                    bjoin[j] = x
                    brow[j] = r
                    dirty = True
                r = tnext[r - r0]
            if nd < label[y]:
                if label[y] == np.inf:
                    touched[k] = y
                    k += 1
                label[y] = nd
                llab[y] = llab[x] + length[y]
                parc[y] = x
                if size >= hd.size:
                    size = -1
                    break
                size = heap_push(hd, hn, size, nd, y)
        if size < 0:
            break
    for i in range(k):
        label[touched[i]] = np.inf
    for r in range(r0, r1):
        tmark[oarc[r]] = -1
    for j in range(nt):
        if not (best[j] <= bound and blen[j] <= lmax):
            blen[j] = np.inf
    return size >= 0


@njit(cache=True)
def _target_buffers(pair_t0, pair_t1, ostart):
    """:func:`_search`'s target buffers ``(tnext, best, blen, bjoin, brow)``, sized for every target range
    ``pair_t0[i]:pair_t1[i]``."""
    maxt = 1
    maxr = 1
    for p in range(pair_t0.size):
        maxt = max(maxt, pair_t1[p] - pair_t0[p])
        maxr = max(maxr, ostart[pair_t1[p]] - ostart[pair_t0[p]])
    return (np.empty(maxr, dtype=np.int64), np.empty(maxt), np.empty(maxt), np.empty(maxt, dtype=np.int64),
            np.empty(maxt, dtype=np.int64))


def new_scratch(rows, m):
    """Search scratch for ``rows`` workers over a graph of ``m`` arcs (each worker one row of each array, left
    clean by every search: reused across calls, see :func:`transitions`): ``(label, llab, tmark, touched,
    parc, hd, hn)``."""
    h = 4 * m + 64
    return (
        np.full((rows, m), np.inf),
        np.zeros((rows, m)),
        np.full((rows, m), -1, dtype=np.int64),
        np.empty((rows, m), dtype=np.int64),
        np.empty((rows, m), dtype=np.int64),
        np.empty((rows, h)),
        np.empty((rows, h), dtype=np.int64),
    )


@njit(cache=True)
def _row(scratch, w):
    """Worker ``w``'s scratch ``ws`` (row ``w`` of each of :func:`new_scratch`'s arrays)."""
    label, llab, tmark, touched, parc, hd, hn = scratch
    return label[w], llab[w], tmark[w], touched[w], parc[w], hd[w], hn[w]


@njit(cache=True, nogil=True)
def transition_chunk(lo, hi, step, jobs, opts, net, out, ok, ws):
    """Jobs ``lo, lo + step, ...`` below ``hi`` of :func:`transitions`, serially, on one worker's scratch
    ``ws``."""
    tb = _target_buffers(jobs[2], jobs[3], opts[0])
    for k in range(lo, hi, step):
        _transition_one(k, jobs, opts, net, out, ok, ws, tb)


@njit(cache=True, nogil=True)
def _transition_one(k, jobs, opts, net, out, ok, ws, tb):
    """Job ``k`` of :func:`transitions` on one worker's scratch ``ws`` and target buffers ``tb``."""
    job_s, job_pair, pair_t0, pair_t1, pair_bound, pair_lmax, pair_off, pair_s0 = jobs
    blen = tb[2]
    p = job_pair[k]
    s = job_s[k]
    t0 = pair_t0[p]
    t1 = pair_t1[p]
    ok[k] = _search(s, t0, t1, pair_bound[p], pair_lmax[p], opts, net, ws, tb)
    base = pair_off[p] + (s - pair_s0[p]) * (t1 - t0)
    for j in range(t1 - t0):
        out[base + j] = blen[j]


@njit(cache=True, parallel=True, nogil=True)
def transitions(jobs, opts, net, out, ok, scratch):
    """Transition tables by bounded searches (:func:`_search`, from each source candidate ``job_s[k]`` of pair
    ``job_pair[k]`` to the pair's target range ``pair_t0:pair_t1``, within ``pair_bound`` and ``pair_lmax``):
    the length (m) of the weight-optimal route to each written to ``out[pair_off + (s - pair_s0) * nt + j]``
    (inf where none within the bound).

    ``jobs = (job_s, job_pair, pair_t0, pair_t1, pair_bound, pair_lmax, pair_off, pair_s0)``: int64 (J,) twice,
    int64 (P,) twice, float64 (P,) (metric units) and float64 (P,) (m), int64 (P,) twice; ``opts`` and ``net``
    as the section notes say; ``out`` float64; ``ok`` bool (J,), set False where job ``k``'s heap ran full
    (the caller computes that pair another way). ``prange`` over the workers, one per row of ``scratch``
    (:func:`new_scratch`: no two threads share a buffer); each worker takes the next job as it is free (a work
    queue, :func:`next_item`: searches of unequal cost keep every worker busy to the end)."""
    nj = jobs[0].size
    W = scratch[0].shape[0]
    queue = np.zeros(1, dtype=np.int64)
    for w in prange(W):
        if w < nj:
            _transition_worker(queue, jobs, opts, net, out, ok, _row(scratch, w))


@njit(cache=True, nogil=True)
def _transition_worker(queue, jobs, opts, net, out, ok, ws):
    """One worker of :func:`transitions`: the jobs ``next_item(queue)`` until none is left."""
    nj = jobs[0].size
    tb = _target_buffers(jobs[2], jobs[3], opts[0])
    while True:
        k = next_item(queue)
        if k >= nj:
            break
        _transition_one(k, jobs, opts, net, out, ok, ws, tb)


@njit(cache=True, nogil=True)
def leg_chunk(legs, opts, net, ws):
    """The routes of the matched transitions ``leg_s[k] -> leg_t[k]`` (``legs = (leg_s, leg_t, pair_t0,
    pair_t1, pair_bound, pair_lmax)``, int64 (L,) four times, float64 (L,) twice: source candidate, target
    candidate of leg ``k``'s pair range ``pair_t0[k]:pair_t1[k]``, bound and lmax as :func:`transitions`'),
    found by the very search that computed the transition (:func:`_search`, the same exploration order: the
    same route and length the Viterbi read) and unpacked from its parents. Serial, without the GIL (callers run
    chunks of legs on threads), on one worker's scratch ``ws`` (as :func:`transition_chunk`).

    Returns
    -------
    dep, arr : int64 (L,)
        The source and target option rows the route leaves and reaches (-1 where the leg has no route within
        its bound: the caller routes that matching another way).
    mid_off : int64 (L + 1,)
        Leg ``k``'s arcs strictly between the departure and arrival arcs are ``mid[mid_off[k]:mid_off[k + 1]]``.
    mid : int64
    same : bool (L,)
        The leg stays on the departure arc (ahead on it; no turn).
    blen : float64 (L,)
        The route's length (m).
    """
    leg_s, leg_t, pair_t0, pair_t1, pair_bound, pair_lmax = legs
    parc = ws[4]
    L = leg_s.size
    tb = _target_buffers(pair_t0, pair_t1, opts[0])
    blen, bjoin, brow = tb[2], tb[3], tb[4]
    dep = np.full(L, -1, dtype=np.int64)
    arr = np.full(L, -1, dtype=np.int64)
    same = np.zeros(L, dtype=np.bool_)
    out_len = np.full(L, np.inf)
    mid_off = np.zeros(L + 1, dtype=np.int64)
    mid = np.empty(max(64, 16 * L), dtype=np.int64)
    rev = np.empty(parc.size, dtype=np.int64)
    n_mid = 0
    for k in range(L):
        t0 = pair_t0[k]
        j = leg_t[k] - t0
        ok = _search(leg_s[k], t0, pair_t1[k], pair_bound[k], pair_lmax[k], opts, net, ws, tb)
        if ok and blen[j] < np.inf:
            arr[k] = brow[j]
            out_len[k] = blen[j]
            x = bjoin[j]
            if x < 0:
                dep[k] = -1 - x
                same[k] = True
            else:
                c = 0
                while x >= 0:  # back to the seed arc: the arcs after it, last first
                    rev[c] = x
                    c += 1
                    x = parc[x]
                dep[k] = -1 - x
                if n_mid + c > mid.size:
                    grown = np.empty(2 * (n_mid + c), dtype=np.int64)
                    grown[:n_mid] = mid[:n_mid]
                    mid = grown
                for i in range(c - 1):  # rev[c - 1] is the departure arc itself
                    mid[n_mid + i] = rev[c - 2 - i]
                n_mid += c - 1
        mid_off[k + 1] = n_mid
    return dep, arr, mid_off, mid[:n_mid].copy(), same, out_len


@njit(cache=True, nogil=True)
def leg_sums(
    dep_arc,
    dep_frac,
    arr_arc,
    arr_frac,
    same,
    mid_off,
    mid,
    start_lon,
    start_lat,
    end_lon,
    end_lat,
    coords,
    head,
    wcost,
    wf,
    dcost,
    df,
    has_dur,
    length,
    has_tc,
    t_first,
    fo,
    from_snapshot,
    is_time,
    turn_cost,
    tcost_arc,
    twf,
    tscale,
    tc_dur,
    tc_w,
    name_id,
    want_points,
):
    """What the route service's legs (:func:`gpuroute.engine.services.route._leg` and ``_leg_json``) read of
    ``L`` legs without steps or annotations, in one pass: each leg's pieces by
    :func:`gpuroute.engine.legs.leg_pieces`, its turns by :func:`~gpuroute.engine.legs.turn_sums` and its
    summary by :func:`~gpuroute.engine.legs.summary_ids` -- the same kernels, the same arguments, so the same
    bits. Leg ``k`` leaves arc ``dep_arc[k]`` at ``dep_frac[k]`` and arrives on ``arr_arc[k]`` at
    ``arr_frac[k]`` through ``mid[mid_off[k]:mid_off[k + 1]]`` (``same[k]``: on the departure arc, no path).

    Returns
    -------
    sums : float64 (L, 5)
        weight_sum, duration_sum, distance_sum, turn_weight, turn_duration.
    summary : int64 (L, 2)
        Name ids (-1: none).
    pts_off : int64 (L + 1,), pts : float64 (P, 2)
        Leg ``k``'s points (``want_points``; else empty).
    """
    L = dep_arc.size
    sums = np.zeros((L, 5))
    summ = np.full((L, 2), -1, dtype=np.int64)
    pts_off = np.zeros(L + 1, dtype=np.int64)
    cap = 64
    if want_points:
        cap = 2 * (mid.size + 3 * L) + 64
    pts = np.empty((cap, 2))
    n_pts = 0
    for k in range(L):
        lo = mid_off[k]
        hi = mid_off[k + 1]
        m_k = mid[lo:hi].copy()
        has_path = not same[k]
        nodes = np.empty(m_k.size + 1, dtype=np.int64)
        if has_path:
            nodes[0] = head[dep_arc[k]]
            for i in range(m_k.size):
                nodes[i + 1] = head[m_k[i]]
        arcs, frac, p, w, d, ln, w_sum, d_sum, l_sum = leg_pieces(
            dep_arc[k], dep_frac[k], arr_arc[k], arr_frac[k], m_k, nodes, has_path, start_lon[k], start_lat[k],
            end_lon[k], end_lat[k], coords, wcost, wf, dcost, df, has_dur, length,
        )
        sums[k, 0] = w_sum
        sums[k, 1] = d_sum
        sums[k, 2] = l_sum
        if has_tc and has_path:
            seq = np.empty(m_k.size + 2, dtype=np.int64)
            seq[0] = dep_arc[k]
            seq[seq.size - 1] = arr_arc[k]
            for i in range(m_k.size):
                seq[i + 1] = m_k[i]
            td, tw = turn_sums(seq, t_first, fo, head, from_snapshot, is_time, turn_cost, tcost_arc, twf, tscale,
                               tc_dur, tc_w)
            sums[k, 3] = tw
            sums[k, 4] = td
        ids = summary_ids(name_id[arcs], ln)
        for i in range(ids.size):
            summ[k, i] = ids[i]
        if want_points:
            if n_pts + p.shape[0] > pts.shape[0]:
                grown = np.empty((2 * (n_pts + p.shape[0]), 2))
                grown[:n_pts] = pts[:n_pts]
                pts = grown
            pts[n_pts : n_pts + p.shape[0]] = p
            n_pts += p.shape[0]
        pts_off[k + 1] = n_pts
    return sums, summ, pts_off, pts[:n_pts].copy()
