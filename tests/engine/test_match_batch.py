"""Map matching in batches (issue 22: ``Engine.match_many``, the columnar pipeline of
:mod:`gpuroute.engine.services.match`): the batched answers are one :meth:`~gpuroute.engine.Engine.match` after
the other's, to the JSON bytes, on a mix of traces that takes every path -- errors in place (``NoSegment``,
``NoMatch``), outliers (breakages: the forward pass asks for a table, and every trace's asks are one search),
gaps and splits, a point given twice, tidy, bearings, no timestamps, no radiuses -- on one thread and on every
worker; and the compiled pieces against plain oracles: the candidates' balls against the k-d tree's, their
projections against NumPy's unique and stable sort, their order against ``np.lexsort``, the hints against
:func:`gpuroute.engine.osrm.make_hint`."""
from __future__ import annotations

import itertools
import json

import numba
import numpy as np
import pytest
from match_traces import make_trace

from gpuroute import config
from gpuroute.engine import EngineError
from gpuroute.engine import match_hmm as H
from gpuroute.engine.services import match as M
from gpuroute.geo import EARTH_RADIUS_M, unit_vectors


@pytest.fixture(scope="module")
def mixed(car_engine):
    """Traces that take every path of the pipeline (see the module notes), each ``{"coords", ...}``."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(10):
        sigma, dt = (5.0, 10.0, 20.0)[i % 3], (2.0, 5.0, 10.0)[i % 3]
        c, ts, _ = make_trace(car_engine, rng, sigma, dt, min_m=300.0, max_m=3000.0, max_points=30)
        c = [(round(x, 6), round(y, 6)) for x, y in c]
        tr = {"coords": c, "timestamps": ts, "radiuses": [sigma] * len(c)}
        if i == 1:  # an outlier in the middle: a breakage, a table asked for
            m = len(c) // 2
            c[m] = (c[m][0] + 0.004, c[m][1] + 0.002)
        if i == 2:  # two outliers apart, no radiuses (the default sigma)
            for m in (len(c) // 3, 2 * len(c) // 3):
                c[m] = (c[m][0] - 0.003, c[m][1])
            del tr["radiuses"]
        if i == 3:  # a time gap: split into two matchings
            m = len(c) // 2
            tr["timestamps"] = ts[:m] + [t + 3600 for t in ts[m:]]
        if i == 4:  # no timestamps
            del tr["timestamps"]
        if i == 5:  # bearings on some points
            tr["bearings"] = [None if j % 3 else (0, 180) for j in range(len(c))]
        out.append(tr)
    lon0, lat0 = out[0]["coords"][0]
    out.append({"coords": [(7.0, 43.0)] * 4, "timestamps": [0, 5, 10, 15]})  # NoSegment: in the sea
    out.append({"coords": [(lon0, lat0), (lon0, lat0)], "timestamps": [0, 1], "radiuses": [20, 20]})  # one point twice
    far = out[3]["coords"][-1]
    out.append({"coords": [(lon0, lat0), far], "timestamps": [0, 1], "radiuses": [5, 5]})  # NoMatch: too far in 1 s
    # a gap of more than 10 points without timestamps after the first (gaps=split without times: points)
    c = out[6]["coords"]
    out.append({"coords": c[:3] + [(7.0, 43.0)] * 12 + c[3:], "radiuses": [10.0] * (len(c) + 12)})
    return out


def _one_at_a_time(engine, traces, **options):
    out = []
    for tr in traces:
        try:
            out.append(engine.match(tr["coords"], timestamps=tr.get("timestamps"), radiuses=tr.get("radiuses"),
                                    bearings=tr.get("bearings"), **options))
        except EngineError as e:
            out.append({"code": e.code, "message": e.message})
    return out


def _json(x):
    return json.dumps(x, allow_nan=True)


@pytest.mark.parametrize("options", [{"overview": "false"}, {"overview": "simplified", "tidy": True},
                                     {"overview": "full", "geometries": "geojson", "gaps": "ignore"},
                                     {"steps": True, "annotations": True, "overview": "false"}])
def test_batched_answers_are_one_at_a_time(car_engine, mixed, monkeypatch, options):
    """``match_many`` answers each trace as ``match`` does, to the JSON bytes (keys in the same order), errors in
    their places, whether its kernels run on the calling thread or on every worker, in one batch or pipelined
    (batches of 3 traces, each solved on a thread while the one before is answered; or two at once ahead)."""
    want = _one_at_a_time(car_engine, mixed, **options)
    codes = [w["code"] for w in want]
    assert {"Ok", "NoSegment", "NoMatch"} <= set(codes)
    assert any(len(w.get("matchings", [])) > 1 for w in want)  # a split
    assert any(tp is None for w in want for tp in w.get("tracepoints", []))  # a dropped point
    # serial; every worker; pipeline -- with the tables searched up front, and by the Viterbi pass (lazy)
    for chunk, jobs, pipe, lazy in ((10**9, 10**9, 10**9, 10**9), (1, 1, 10**9, 10**9), (1, 1, 3, 10**9),
                                    (10**9, 10**9, 10**9, 0), (1, 1, 10**9, 0), (1, 1, 3, 0)):
        monkeypatch.setattr(M, "VITERBI_CHUNK", chunk)
        monkeypatch.setattr(M, "LEG_CHUNK", chunk)
        monkeypatch.setattr(M, "PIPELINE_TRACES", pipe)
        monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", lazy)
        monkeypatch.setattr(config, "SERVE_MATCH_PARALLEL_JOBS", jobs)
        monkeypatch.setattr(M, "PIPELINE_DEPTH", 2 if lazy == 0 else 1)  # two batches solved at once ahead
        got = car_engine.match_many(mixed, **options)
        assert [_json(g) for g in got] == [_json(w) for w in want]


def test_batched_asks_every_traces_table_in_one_search(car_engine, mixed, monkeypatch):
    """Traces whose forward pass asks for a table (after a breakage) get them in one search per round, not one
    per trace, and the answers stay those of one trace at a time."""
    calls = []
    search = M._Tables._search

    def counting(self, cols):
        calls.append(int(cols[0].size))
        return search(self, cols)

    monkeypatch.setattr(M._Tables, "_search", counting)
    monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", 10**9)  # the tables searched up front
    outliers = [mixed[1], mixed[2], mixed[1], mixed[2]]
    want, per_trace = [], []
    for tr in outliers:
        calls.clear()
        want += _one_at_a_time(car_engine, [tr], overview="false")
        per_trace.append(len(calls))
    calls.clear()
    got = car_engine.match_many(outliers, overview="false")
    assert got == want
    assert min(per_trace) >= 2  # each trace: its steps, then at least one ask
    assert len(calls) == max(per_trace)  # the batch: as many searches as the trace that asks most
    assert calls[1] == len(outliers)  # the first ask round holds every trace's table


def test_lazy_pass_searches_its_own_tables(car_engine, mixed, monkeypatch):
    """Where the Viterbi pass searches its own tables (:data:`gpuroute.engine.services.match.LAZY_TRACES_PER_THREAD`),
    no table is searched before it, nor, up to :data:`~gpuroute.engine.services.match.LAZY_ASK_POINTS` points back,
    after a breakage; an ask farther back is one search of every trace's asks per round, as before; the answers
    stay those of one trace at a time, to the JSON bytes, on one worker and on every worker."""
    calls = []
    search = M._Tables._search

    def counting(self, cols):
        calls.append(int(cols[0].size))
        return search(self, cols)

    outliers = [mixed[1], mixed[2], mixed[0], mixed[1], mixed[2]]
    monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", 10**9)
    want = _one_at_a_time(car_engine, outliers, overview="false")
    monkeypatch.setattr(M._Tables, "_search", counting)
    car_engine.match_many(outliers, overview="false")
    eager, calls[:] = list(calls), []
    assert eager[0] == sum(len(tr["coords"]) - 1 for tr in outliers)  # every step's table, up front
    assert len(eager) >= 2  # then the asks after the breakages
    monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", 0)
    threads = numba.get_num_threads()
    for workers, back in itertools.product((1, numba.config.NUMBA_NUM_THREADS), (1, M.LAZY_ASK_POINTS)):
        monkeypatch.setattr(M, "LAZY_ASK_POINTS", back)
        calls.clear()
        numba.set_num_threads(workers)  # one worker; every worker (the traces dealt largest first)
        try:
            got = car_engine.match_many(outliers, overview="false")
        finally:
            numba.set_num_threads(threads)
        assert [_json(g) for g in got] == [_json(w) for w in want]
        if back == 1:  # only the next point's tables: the asks after a breakage as before
            assert calls == eager[1:]
        else:
            assert calls == []


def test_lazy_pass_heap_full_is_the_callers(car_engine, mixed, monkeypatch):
    """A search of the Viterbi pass's own that runs out of heap leaves its table to the caller (one search of every
    trace's asks, where a pair whose search runs out goes to the many-to-many), as the tables searched up front
    do: the same answers either way, to the JSON bytes."""
    small = H.new_scratch

    def tiny(rows, m):  # a heap of 8 entries: the searches that push more run out
        label, llab, tmark, touched, parc, hd, hn = small(rows, m)
        return label, llab, tmark, touched, parc, hd[:, :8].copy(), hn[:, :8].copy()

    monkeypatch.setattr(M, "new_scratch", tiny)
    monkeypatch.setattr(M, "_SCRATCH", M._ScratchPool())
    some = [mixed[0], mixed[1], mixed[4]]
    monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", 10**9)
    want = car_engine.match_many(some, overview="false")
    monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", 0)
    calls = []
    search = M._Tables._search

    def counting(self, cols):
        calls.append(int(cols[0].size))
        return search(self, cols)

    monkeypatch.setattr(M._Tables, "_search", counting)
    got = car_engine.match_many(some, overview="false")
    assert [_json(g) for g in got] == [_json(w) for w in want]
    assert any(w["code"] == "Ok" for w in want)
    assert calls  # the pass's searches ran out: their tables were the caller's


def test_empty_batch(car_engine):
    assert car_engine.match_many([]) == []


# ------------------------------------------------------------------------------------------ compiled pieces
def _naive_pairs(lon, lat, radius, lens, samples, index):
    """:func:`gpuroute.engine.match_hmm.candidate_pairs` by NumPy: np.unique of each ball's segments, their
    projections, those within the radius by distance (stable)."""
    from gpuroute.geo.segments import project_one

    deg = np.pi / 180.0
    out_pt, out_seg, out_f = [], [], []
    pos = 0
    for i in range(lon.size):
        segs = np.unique(index.sample_segment[samples[pos : pos + lens[i]]])
        pos += lens[i]
        kx = deg * EARTH_RADIUS_M * np.cos(lat[i] * deg)
        rows = []
        for g in segs.tolist():
            r = project_one(lon[i], lat[i], kx, deg * EARTH_RADIUS_M, index.lon_u[g], index.lat_u[g],
                                    index.lon_v[g], index.lat_v[g])
            if r[1] <= radius[i]:
                rows.append((g, (r[0], r[1], r[2], r[4], r[5])))
        for j in np.argsort([f[1] for _, f in rows], kind="stable").tolist():
            out_pt.append(i)
            out_seg.append(rows[j][0])
            out_f.append(rows[j][1])
    return np.array(out_pt, dtype=np.int64), np.array(out_seg, dtype=np.int64), np.array(out_f).reshape(-1, 5)


def test_candidates_balls_and_projections(car_engine):
    """The grid's balls hold the k-d tree's samples (``query_ball_point``, the same radius), for radii from
    3 m to 600 m and points on and off the network; the projections are the NumPy oracle's (sorted unique
    segments, distance order stable by segment id)."""
    index = M.candidate_index(car_engine)
    rng = np.random.default_rng(3)
    lo, hi = car_engine.graph.coords.min(0), car_engine.graph.coords.max(0)
    n = 600
    lon = rng.uniform(lo[0] - 0.003, hi[0] + 0.003, n)
    lat = rng.uniform(lo[1] - 0.003, hi[1] + 0.003, n)
    radius = rng.choice([3.0, 15.0, 30.0, 60.0, 200.0, 600.0], n)
    q = unit_vectors(lon, lat) * EARTH_RADIUS_M
    reach = radius * (1.01 + 5.0 * radius / EARTH_RADIUS_M) + index._slack
    xyz, h, grid = M._sample_grid(index)
    lens, samples = H.ball_samples(q, reach, xyz, h, *grid)
    cum = np.concatenate([[0], np.cumsum(lens)])
    want = index.tree.query_ball_point(q, reach)
    assert all(sorted(samples[cum[i] : cum[i + 1]].tolist()) == sorted(want[i]) for i in range(n))
    assert lens.sum() > 10 * n
    got = H.candidate_pairs(lon, lat, radius, lens, samples, index.sample_segment, index.lon_u, index.lat_u,
                            index.lon_v, index.lat_v)
    exp = _naive_pairs(lon, lat, radius, lens, samples, index)
    assert got[0].size > n
    for g, e in zip(got, exp, strict=True):
        assert np.array_equal(g, e)


def test_split_order_is_lexsort():
    """The candidates' order (originals, then the split copies) by one merge per point is ``np.lexsort`` by
    point, distance and position, ties included."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        k = int(rng.integers(0, 40))
        pt = np.sort(rng.integers(0, 6, k)).astype(np.int64)
        d = np.round(rng.uniform(0, 4, k))
        for p in np.unique(pt):
            d[pt == p] = np.sort(d[pt == p])
        both = rng.random(k) < 0.5
        c_pt, c_d = np.concatenate([pt, pt[both]]), np.concatenate([d, d[both]])
        assert np.array_equal(H.split_order(pt, d, both), np.lexsort((np.arange(c_pt.size), c_d, c_pt)))


def test_hints_array_is_make_hint():
    from gpuroute.engine.osrm import _fingerprint_bytes, hints_array, make_hint

    rng = np.random.default_rng(5)
    seg = np.concatenate([rng.integers(0, 2**31 - 1, 200), [0, 2**31 - 1]]).astype(np.int32)
    frac = np.concatenate([rng.random(196), [0.0, 1.0, -0.0, 1e-310, 0.5, 1 / 3]])
    for fp in ("0123456789abcdef0123", "ffff", ""):
        assert hints_array(seg, frac, _fingerprint_bytes(fp)) == [make_hint(int(s), float(f), fp)
                                                                  for s, f in zip(seg, frac, strict=True)]


@pytest.mark.parametrize("kw, code, words", [
    ({"timestamps": [0, 1.5]}, "InvalidValue", "timestamp of coordinate 1"),
    ({"timestamps": [0, True]}, "InvalidValue", "timestamp of coordinate 1"),
    ({"timestamps": [5, 3]}, "InvalidValue", "timestamp 1 (3) is before timestamp 0 (5)"),
    ({"timestamps": [0, float("nan")]}, "InvalidValue", "timestamp of coordinate 1"),
    ({"timestamps": [0, 10**400]}, "InvalidValue", "timestamp of coordinate 1"),
    ({"radiuses": [5, -1]}, "InvalidOptions", "radius of coordinate 1"),
    ({"radiuses": [5, 10**400]}, "InvalidOptions", "radius of coordinate 1"),
    ({"radiuses": [5, float("nan")]}, "InvalidOptions", "radius of coordinate 1"),
    ({"radiuses": [5, float("inf")]}, "InvalidValue", "radius of coordinate 1 is inf"),
])
def test_per_value_checks_name_the_value(kw, code, words):
    """The array fast path of the timestamps' and radiuses' checks rejects what the per-value checks reject,
    with their messages (the coordinate named); an integer too large for a float is a bad value too (it was
    an OverflowError: a 500)."""
    from gpuroute.engine.params import MatchParams

    with pytest.raises(EngineError) as e:
        MatchParams.from_kwargs([(7.42, 43.73), (7.421, 43.731)], **kw)
    assert e.value.code == code and words in e.value.message


def test_plain_numbers_are_the_per_value_arrays():
    from gpuroute.engine.params import MatchParams

    for ts, rad in itertools.product(([0, 5], [0.0, 5.0], (0, 5), [np.int64(0), np.int64(5)]),
                                     ([5, 7.5], (5.0, 7.5), [np.float32(5), 7.5], ["5", 7.5])):
        p = MatchParams.from_kwargs([(7.42, 43.73), (7.421, 43.731)], timestamps=ts, radiuses=rad)
        assert p.timestamps.tolist() == [0.0, 5.0] and p.timestamps.dtype == np.float64
        assert p.radiuses.tolist() == [5.0, 7.5] and p.radiuses.dtype == np.float64


def _records(engine, traces):
    from gpuroute.engine.params import MatchParams

    return [MatchParams.from_kwargs(tr["coords"], limits=engine.limits, timestamps=tr.get("timestamps"),
                                    radiuses=tr.get("radiuses"), bearings=tr.get("bearings")) for tr in traces]


@pytest.mark.parametrize("chunk", [1, 10**9])
def test_candidates_distances_are_haversine(car_engine, mixed, monkeypatch, chunk):
    """Each candidate's distance (computed with its projection, on the candidates' threads) is the great-circle
    distance from its point to its snapped location, :func:`gpuroute.geo.haversine_m`'s to the bit, on every row
    (split copies too), in chunks of points on threads and on one."""
    from gpuroute.geo import haversine_m

    monkeypatch.setattr(M, "VITERBI_CHUNK", chunk)
    traces = M.Traces(_records(car_engine, mixed * 2), config.SERVE_MATCH_SIGMA_M)
    allc = M._candidates(M.candidate_index(car_engine), traces)
    cand = np.repeat(np.arange(allc.point_start.size - 1), np.diff(allc.point_start))
    assert cand.size > 100 and np.any(np.diff(cand) == 0)  # rows of candidates with both directions
    want = haversine_m(allc.input_lon[cand], allc.input_lat[cand], allc.lon, allc.lat)
    assert np.array_equal(allc.distance, want)
    assert np.array_equal(allc.input_lon, traces.lon[traces.cpoint])


def test_work_queues_run_each_item_once(car_engine, mixed, monkeypatch):
    """The parallel kernels' work queues (:func:`gpuroute.engine.match_hmm.next_item`): the Viterbi pass with its
    searches (:func:`~gpuroute.engine.match_hmm.viterbi_search_many`) and the transition searches
    (:func:`~gpuroute.engine.match_hmm.transitions`) on 1, 2 and more workers than items leave every array as the
    serial pass does (each trace and each search run once, by whichever worker took it)."""
    real_tables = M.transitions
    seen = {"pass": 0, "tables": 0}

    def check_pass(tables, todo, trace, hmm, tabs, state, out, status, steps, opts, net):
        runs = []
        for W in (1, 2, todo.size + 3):
            st, o, s = tuple(x.copy() for x in state), tuple(x.copy() for x in out), status.copy()
            H.viterbi_search_many(W, todo, trace, hmm, tabs, st, o, s, steps, opts, net, H.new_scratch(W, net[3].size))
            runs.append(st + o + (s,))
        ws = tuple(x[0] for x in H.new_scratch(1, net[3].size))
        H.viterbi_search_chunk(0, todo.size, 1, todo, trace, hmm, tabs, state, out, status, steps, opts, net, ws)
        for got in runs:
            assert all(np.array_equal(g, w) for g, w in zip(got, state + out + (status,), strict=True))
        seen["pass"] += 1

    def check_tables(jobs, opts, net, out, ok, scratch):
        nj = jobs[0].size
        ws = tuple(x[0] for x in H.new_scratch(1, net[3].size))
        H.transition_chunk(0, nj, 1, jobs, opts, net, out, ok, ws)
        for W in (1, 3, nj + 2):
            o, k = np.full_like(out, -1.0), np.zeros_like(ok)
            real_tables(jobs, opts, net, o, k, H.new_scratch(W, net[3].size))
            assert np.array_equal(o, out) and np.array_equal(k, ok)
        seen["tables"] += 1

    monkeypatch.setattr(M, "_viterbi_search", check_pass)
    monkeypatch.setattr(M, "transitions", check_tables)
    monkeypatch.setattr(config, "SERVE_MATCH_PARALLEL_JOBS", 1)
    want = _one_at_a_time(car_engine, mixed, overview="false")
    threads = numba.get_num_threads()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    try:
        for lazy in (0, 10**9):  # the pass searches its tables; every table searched up front
            monkeypatch.setattr(M, "LAZY_TRACES_PER_THREAD", lazy)
            got = car_engine.match_many(mixed, overview="false")
            assert [_json(g) for g in got] == [_json(w) for w in want]
    finally:
        numba.set_num_threads(threads)
    assert seen["pass"] and (seen["tables"] or numba.config.NUMBA_NUM_THREADS == 1)


def test_leg_summaries_are_the_names_joined(car_engine, mixed):
    """Each leg's ``summary`` (made once per distinct pair of names, then taken per leg) is its two names joined
    by ", " (one name alone, none: ""), leg by leg as :func:`gpuroute.engine.match_hmm.leg_sums` gives them."""
    from gpuroute.engine.algorithms import metric_snapshot

    recs = _records(car_engine, mixed)
    snap = metric_snapshot(car_engine, None)
    got = M._solve(car_engine, recs, M.candidate_index(car_engine), None, snap, "auto")
    legs = next(q[0] for pl in got[7] if pl for q in pl if q is not None)
    summ = legs.sums()[1].tolist()
    names = car_engine._names
    want = [", ".join(names[n] for n in pair if n >= 0) for pair in summ]
    assert legs._leg_lists()[3] == want
    assert len(want) > 20 and len(set(want)) > 3 and "" in want and any(", " in w for w in want)


def test_answers_built_with_the_collector_paused(car_engine, mixed, monkeypatch):
    """``match_many`` builds its answers with Python's cyclic garbage collector paused (its full passes over every
    live object cost more than the answers: :func:`gpuroute.engine.services.match._gc_paused`) and leaves it as it
    found it -- enabled, disabled, after an error too; ``PAUSE_GC = False`` leaves it alone."""
    import gc

    seen = []
    real = M._answers

    def spy(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(M, "_answers", spy)
    assert gc.isenabled()
    car_engine.match_many(mixed[:3], overview="false")
    assert seen == [False] and gc.isenabled()
    with pytest.raises(EngineError):  # NoSegment, raised from inside
        car_engine.match(mixed[10]["coords"], timestamps=mixed[10]["timestamps"])
    assert gc.isenabled()
    gc.disable()
    try:
        car_engine.match_many(mixed[:3], overview="false")
        after = gc.isenabled()
    finally:
        gc.enable()
    assert not after
    monkeypatch.setattr(M, "PAUSE_GC", False)
    car_engine.match_many(mixed[:3], overview="false")
    assert seen[-1] is True
