"""The server's warm-up (:mod:`gpuroute.server.warmup`): what it runs, and that it stays cheap."""
from __future__ import annotations

import numba
import pytest

from gpuroute import config
from gpuroute.server import create_app, warm_up
from gpuroute.server import warmup as W


@pytest.fixture(scope="module")
def engine():
    from gpuroute.engine import Engine

    return Engine.open("monaco")


def test_the_long_match_trace_lies_on_a_segment(engine):
    """The long ``/match`` trace's point is a ``/nearest`` location: on a segment, so that a small GPS
    deviation still finds a candidate at every point."""
    app = create_app(engine)
    pts = W.warm_points(engine)
    on = W.on_network_point(app.state.adapter, pts)
    assert on is not None
    got = engine.nearest(on)["waypoints"][0]
    assert got["distance"] < 0.5
    reqs = W._requests(app.state.adapter.services, pts, app.state.limits, None, on)
    trace = [r for r in reqs if r[0] == "match"][-1]
    assert set(trace[1].split(";")) == {f"{on[0]:.7f},{on[1]:.7f}"}
    assert trace[2]["radiuses"].split(";")[0] == str(W._MATCH_SIGMA_M)
    # without such a point: the first warm-up point, with the wide deviation
    old = [r for r in W._requests(app.state.adapter.services, pts, app.state.limits) if r[0] == "match"][-1]
    assert old[2]["radiuses"].split(";")[0] == "50"


def test_the_warm_up_runs_the_parallel_match_path(engine, monkeypatch):
    """With several numba threads, the long trace makes at least ``config.SERVE_MATCH_PARALLEL_JOBS``
    transition searches: the parallel kernel is loaded before serving (with one candidate a point already)."""
    import gpuroute.engine.services.match as match

    if numba.get_num_threads() < 2:
        pytest.skip("one numba thread: the parallel path is never taken")
    if not callable(getattr(match, "transitions", None)):
        pytest.skip("the match service has no parallel transitions kernel")
    jobs = []
    real = match.transitions

    def spy(js, *args):
        jobs.append(int(js[0].size))
        return real(js, *args)

    monkeypatch.setattr(match, "transitions", spy)
    report = warm_up(create_app(engine, warm_up=True))
    assert not report["failed"], report["failed"]
    assert jobs and max(jobs) >= int(config.SERVE_MATCH_PARALLEL_JOBS)
    assert W._MATCH_POINTS - 1 >= int(config.SERVE_MATCH_PARALLEL_JOBS)  # one candidate a point suffices


def test_the_warm_up_runs_the_one_thread_viterbi_pass(engine, monkeypatch):
    """The Viterbi pass that searches its own tables (what a server's ``/match`` takes on one numba thread) runs in
    the warm-up whatever this process's thread setting: its kernel is compiled before serving."""
    import gpuroute.engine.services.match as match

    seen = []
    real = match.viterbi_search_chunk

    def spy(*args):
        seen.append(numba.get_num_threads())
        return real(*args)

    monkeypatch.setattr(match, "viterbi_search_chunk", spy)
    threads = numba.get_num_threads()
    report = warm_up(create_app(engine, warm_up=True))
    assert not report["failed"], report["failed"]
    assert seen and set(seen) == {1}
    assert numba.get_num_threads() == threads  # the setting given back
