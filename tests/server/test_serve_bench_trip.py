"""benchmarks/serve.py's /trip part (issue 20's "/trip 12 points <= 2x osrm-routed's"): the request builder
(trips tile their points, the same paths with OSRM's defaults for both servers), the trip agreement (total
durations ours / osrm-routed's, answers that only one side gave) and the side-by-side ratios. CPU only, no
server started."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "serve.py"


@pytest.fixture(scope="module")
def serve():
    spec = importlib.util.spec_from_file_location("_bench_serve_trip", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _answer(duration):
    return {"code": "Ok", "trips": [{"duration": duration, "distance": 1.0, "legs": []}], "waypoints": []}


def test_trip_requests_tile_the_points_size_by_size(serve):
    rng = np.random.default_rng(3)
    pts = {4: rng.uniform(7.4, 7.5, (12, 2)), 12: rng.uniform(7.4, 7.5, (40, 2))}  # 12 has spare points
    req = serve.trip_requests(pts, 3)
    assert sorted(req) == ["12", "4"]
    for k, trips in req.items():
        k = int(k)
        assert len(trips) == 3
        for j, t in enumerate(trips):
            got = [tuple(float(x) for x in c.split(",")) for c in t.split(";")]
            assert len(got) == k
            np.testing.assert_allclose(got, pts[k][j * k:(j + 1) * k], atol=5e-7)  # 1e-6 degrees, rounded


def test_trip_requests_too_few_points_names_the_size(serve):
    with pytest.raises(ValueError, match=r"trip size 12: 20 points, 2 trips need 24"):
        serve.trip_requests({12: np.zeros((20, 2))}, 2)


def test_trip_paths_osrm_defaults_same_order(serve):
    req = {"trips": {"4": ["a;b;c;d", "e;f;g;h", "i;j;k;l"], "12": ["x"] * 3}}
    paths = serve.trip_paths(req, [4], 2)
    assert list(paths) == ["trip 4"]
    assert paths["trip 4"] == [f"/trip/v1/driving/{c}?roundtrip=true&source=any&destination=any"
                               for c in ("a;b;c;d", "e;f;g;h")]


def test_trip_agreement_ratios_and_one_sided_answers(serve):
    ours_d = [100.0, 200.04, 310.0, None, 50.0, 1000.5]
    theirs_d = [110.0, 200.0, 300.0, 90.0, None, 1000.0]
    ours = [None if d is None else _answer(d) for d in ours_d]
    theirs = [None if d is None else _answer(d) for d in theirs_d]
    ours[4] = {"code": "NoTrips", "message": "x"}  # a refusal is no duration either
    theirs[4] = None
    a = serve.trip_agreement(ours, theirs, 12)
    ratios = [100 / 110, 200.04 / 200, 310 / 300, 1000.5 / 1000]
    assert a["n"] == 4 and a["n_total"] == 6
    assert a["only_one_side"] == 1  # the fourth: only osrm-routed answered; the fifth: neither
    assert a["ours_le_theirs"] == pytest.approx(2 / 4)  # 200.04 <= 200 + 0.05 s (OSRM's rounding)
    assert a["ours_le_theirs_01pct"] == pytest.approx(3 / 4)  # 1000.5 <= 1.001 x 1000; 310 > 1.001 x 300
    assert a["ratio_min"] == pytest.approx(min(ratios)) and a["ratio_max"] == pytest.approx(max(ratios))
    assert a["ratio_median"] == pytest.approx(float(np.median(ratios)))
    assert a["ratios"][:3] == pytest.approx(ratios[:3]) and a["ratios"][3:5] == [None, None]
    assert a["ratios"][5] == pytest.approx(ratios[3])
    assert a["within_1pct"] == pytest.approx(2 / 4)
    assert a["ours_total_s"] == pytest.approx(1610.54) and a["theirs_total_s"] == pytest.approx(1610.0)
    assert a["osrm_order"] == "farthest insertion"
    assert serve.trip_agreement(ours, theirs, 10)["osrm_order"] == "brute force"
    assert math.isnan(serve.trip_duration(None))


def test_trip_agreement_needs_the_same_requests(serve):
    with pytest.raises(ValueError, match="2 answers of ours, 1 of osrm-routed"):
        serve.trip_agreement([_answer(1.0)] * 2, [_answer(1.0)], 4)


def test_side_by_side_pairs_same_round_service_clients(serve):
    def row(server, rnd, service, clients, p50, cpu, rps):
        return {"server": server, "round": rnd, "service": service, "clients": clients, "n": 10, "p50_ms": p50,
                "server_cpu_ms_per_req": cpu, "throughput_rps": rps}

    res = {"graphs": {"Monaco": {"rows": [
        row("osrm-mld", 0, "trip 12", 1, 4.0, 2.0, 250.0), row("osrm-mld", 1, "trip 12", 1, 8.0, 4.0, 125.0),
        row("gpuroute", 0, "trip 12", 1, 6.0, 5.0, 160.0), row("gpuroute", 1, "trip 12", 1, 6.0, 5.0, 160.0),
        row("gpuroute", 1, "trip 25", 1, 30.0, 30.0, 30.0),  # osrm-routed has no such row: no ratio
    ]}}}
    got = serve.side_by_side(res)
    assert [(x["round"], x["service"]) for x in got] == [(0, "trip 12"), (1, "trip 12")]
    assert got[0]["p50"] == pytest.approx(1.5) and got[0]["cpu"] == pytest.approx(2.5)
    assert got[0]["rps"] == pytest.approx(160 / 250)
    assert got[1]["p50"] == pytest.approx(0.75) and got[1]["cpu"] == pytest.approx(1.25)


@pytest.mark.parametrize("argv, message", [
    (["--trips", "5"], "go with --dataset"),
    (["--trip-sizes", "12"], "go with --dataset"),
    (["--dataset", "--trip-sizes", "12", "1"], "1 is not"),
    (["--dataset", "--trip-sizes", "12", "12"], "each size once"),
    (["--dataset", "--trips", "-1"], "expected 0 or more"),
])
def test_trip_options_checked_before_anything_runs(serve, monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["serve.py", *argv])
    monkeypatch.setattr(serve, "main_dataset", lambda args: pytest.fail("main_dataset ran"))
    with pytest.raises(SystemExit) as e:
        serve.main()
    assert e.value.code == 2
    assert message in capsys.readouterr().err
