"""Map matching onto restricted roads (issue 22's quality target; benchmarks/match_quality.py).

car.lua prices a turn onto a restricted road (``access=destination`` / ``private``: the ``restricted`` arc attribute)
at ``max_turn_weight`` (3,276.7 s of weight): a routing preference, not time. OSRM's weight bound on a transition,
``(great-circle + max_distance_delta) / 4 m/s``, then rules every transition onto such a road out, and a trace that
drives one -- one that starts or ends on a destination-only lane, or passes along one -- lost its first or last
points (matched 3-11 % short on Monaco) or was matched round it (0.8-2.4 km detours in Helsinki). The transitions
now pay at most :data:`gpuroute.engine.services.match.RESTRICTED_ENTRY_S` for that turn (0: free).
"""
from __future__ import annotations

import numpy as np
import pytest
from match_traces import matched_length, nth_trace, oracle_error

from gpuroute.engine.services import match as M

pytest.importorskip("osmium")
pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's car.lua")




@pytest.mark.parametrize(("sigma", "dt", "n"), [(5.0, 5.0, 38), (5.0, 10.0, 11), (10.0, 10.0, 57)])
def test_trace_on_a_restricted_road_is_matched_whole(car_engine, sigma, dt, n):
    """Three Monaco traces of the grid that start or end on a restricted road: one matching from the first point to
    the last, its length the true route's within 2 % (8.5 %, 10.7 % and 3.3 % short before, the end on the
    restricted road unmatched)."""
    tr = nth_trace(car_engine, [22, 0, int(sigma), int(dt)], sigma, dt, n)
    c = tr["coords"]
    res = car_engine.match(c, timestamps=tr["timestamps"], radiuses=[sigma] * len(c), overview="false")
    err = abs(matched_length(res) / tr["length"] - 1.0)
    tps = res["tracepoints"]
    assert len(res["matchings"]) == 1 and tps[0] is not None and tps[-1] is not None, (len(res["matchings"]), err)
    assert err <= 0.02, (err, oracle_error(tr, sigma))


def test_turn_onto_a_restricted_road_costs_at_most_the_cap(car_engine):
    """The transitions' metric (:func:`gpuroute.engine.services.match._turn_metric`): every turn from an unrestricted
    arc onto a restricted one costs its out-arc plus at most ``RESTRICTED_ENTRY_S`` (car.lua's is 3,276.7 s: there
    are such turns on Monaco), every other turn what the metric snapshot says; the snapshot itself is unchanged."""
    from gpuroute.engine.algorithms import metric_snapshot

    e = car_engine
    snap = metric_snapshot(e, None)
    assert snap is not None
    M._TURN_CACHE.clear()
    first, out_arc, tcost, cost, scale, _ = M._turn_metric(e, snap)
    raw = np.asarray(snap.turn_cost, dtype=np.float64)
    restricted = np.asarray(e.graph.arc_attrs["restricted"], dtype=bool)
    src = np.repeat(np.arange(first.size - 1), np.diff(first))
    into = (raw >= 0) & restricted[out_arc] & ~restricted[src]
    pen_raw = (raw - cost[out_arc]) * scale
    assert into.any() and pen_raw[into].max() > 3000.0
    pen = (tcost - cost[out_arc]) * scale
    assert np.all(pen[into] <= M.RESTRICTED_ENTRY_S + 1e-6)
    assert np.allclose(pen[into], np.minimum(pen_raw[into], M.RESTRICTED_ENTRY_S))
    assert np.array_equal(tcost[~into], raw[~into])
    assert np.asarray(snap.turn_cost, dtype=np.float64).tolist() == raw.tolist()
