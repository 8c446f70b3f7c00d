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


def test_the_compile_log_sees_a_compilation():
    """:class:`CompileLog` (what the next test reads) lists a function numba compiles while it watches."""
    from numba import njit

    @njit
    def twice(x):
        return 2 * x

    log = W.CompileLog()
    with log.watch():
        assert twice(21) == 42
    assert [e[0].rsplit(".", 1)[-1] for e in log.entries] == ["twice"] and log.entries[0][1] == "int64"
    with log.watch():
        twice(1)  # compiled already: nothing
    assert len(log.entries) == 1


def test_no_request_compiles_after_the_warm_up(engine):
    """After the warm-up, requests at other points than its own, of each service it ran, compile nothing."""
    from gpuroute.server.app import parse_request

    app = create_app(engine, warm_up=True)
    report = warm_up(app)
    assert not report["failed"], report["failed"]
    assert set(report["compiled"]) >= {"route", "table", "nearest"}
    server = app.state.adapter
    pts = W.warm_points(engine, 7)  # not the warm-up's 12 points

    def c(*i):
        return ";".join(f"{pts[j][0]:.7f},{pts[j][1]:.7f}" for j in i)

    log = W.CompileLog()
    with log.watch():
        for service, coords, options in [("route", c(2, 5), {}), ("route", c(1, 3, 6), {"steps": "true"}),
                                         ("table", c(0, 2, 4), {}), ("nearest", c(3), {})]:
            status, body = server.work(parse_request(service, "test", coords, options, server.limits))
            assert status == 200, body
    assert log.entries == [], [e[0] for e in log.entries]


def test_cache_state_and_a_bad_cache_dir(tmp_path):
    """:func:`cache_state` counts the loaded cached kernels; :func:`use_cache_dir` refuses a folder it cannot
    write, naming it, and leaves numba's setting as it was."""
    import os

    from numba.core import config as numba_config

    W.import_kernel_modules()
    st = W.cache_state()
    assert st["kernels"] > 0 and 0 <= st["missing"] <= st["kernels"] and st["folders"]
    before = (os.environ.get(W.CACHE_ENV), numba_config.CACHE_DIR)
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="not writable") as e:
        W.use_cache_dir(tmp_path / "f" / "x")
    assert str(tmp_path / "f" / "x") in str(e.value)
    assert (os.environ.get(W.CACHE_ENV), numba_config.CACHE_DIR) == before
