"""``gpuroute trip`` on the shipped Monaco extract: CSV and JSON stops, the visiting order and totals,
``--json`` (the OSRM /trip response), ``--no-roundtrip``, bad input (exit 2).

Where :mod:`gpuroute.tours` has no ``tsp`` yet, an exact brute-force stand-in is injected for this module."""
import itertools
import json
import math
import sys
import types

import numpy as np
import pytest

pytest.importorskip("osmium")
pytest.importorskip("polyline")

from gpuroute.cli.main import main  # noqa: E402

STOPS = [(7.4282, 43.7396), (7.4233, 43.7347), (7.4206, 43.7314), (7.4367, 43.7441)]


def brute_tsp(costs, *, start=None, end=None, time_limit=1.0, device="auto", seed=None):
    c = np.asarray(costs, dtype=np.float64)
    n = c.shape[0]
    closed = start is None and end is None or start == end
    first = 0 if start is None and end is None else start
    best, best_cost = None, math.inf
    for p in itertools.permutations(range(n)):
        if closed and p[0] != first or (not closed and (p[0] != start or p[-1] != end)):
            continue
        cost = sum(c[a, b] for a, b in zip(p[:-1], p[1:], strict=True)) + (c[p[-1], p[0]] if closed else 0.0)
        if cost < best_cost:
            best, best_cost = p, cost
    return types.SimpleNamespace(tour=np.array(best, dtype=np.int64), cost=best_cost, closed=closed)


@pytest.fixture(scope="module", autouse=True)
def tours():
    try:
        from gpuroute.tours import tsp  # noqa: F401

        yield
        return
    except ImportError:
        pass
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, "gpuroute.tours", types.SimpleNamespace(tsp=brute_tsp))
    yield
    mp.undo()


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_trip_text_and_json(tmp_path, capsys):
    csv = tmp_path / "stops.csv"
    csv.write_text("lon,lat\n" + "".join(f"{lon},{lat}\n" for lon, lat in STOPS))
    code, out, err = run(capsys, ["trip", "--graph", "monaco", "--stops", str(csv)])
    assert code == 0, err
    order = next(line for line in out.splitlines() if line.startswith("order"))
    visit = [int(x) for x in order.split()[1:] if x.isdigit()]
    assert visit[0] == visit[-1] == 0 and sorted(visit[:-1]) == [0, 1, 2, 3]
    assert "duration" in out and "distance" in out and out.count("leg ") == 4
    js = tmp_path / "stops.json"
    js.write_text(json.dumps([list(p) for p in STOPS]))
    code, out, err = run(capsys, ["trip", "--stops", str(js), "--no-roundtrip", "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["code"] == "Ok" and len(res["trips"][0]["legs"]) == 3
    assert res["waypoints"][0]["waypoint_index"] == 0 and res["waypoints"][-1]["waypoint_index"] == 3


def test_trip_bad_input(tmp_path, capsys):
    one = tmp_path / "one.csv"
    one.write_text("7.42,43.73\n")
    assert run(capsys, ["trip", "--stops", str(one)])[0] == 2
    assert run(capsys, ["trip", "--stops", str(tmp_path / "missing.csv")])[0] == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"coordinates": [[7.42, "x"], [7.43, 43.7]]}')
    code, _, err = run(capsys, ["trip", "--stops", str(bad)])
    assert code == 2 and "entry 0" in err
    two = tmp_path / "two.csv"
    two.write_text("7.42,43.73\n7.43,43.74\n")
    code, _, err = run(capsys, ["trip", "--stops", str(two), "--no-roundtrip", "--source", "any"])
    assert code == 2 and "NotImplemented" in err
