"""``Engine.close()`` (issue 19): every GPU object the engine made is released (the hierarchies' device
copies and hub labels, the overlay's customizer, the isochrone drawers), the engine still answers, and
``with`` closes it."""
import types

import pytest

pytest.importorskip("osmium")

from gpuroute.engine import Engine  # noqa: E402


def test_close_releases_every_gpu_object_and_the_engine_still_answers(monkeypatch):
    eng = Engine.open("monaco")
    released = []
    monkeypatch.setattr(eng.ch, "release", lambda: released.append("ch"))
    eng.distance_ch = types.SimpleNamespace(release=lambda: released.append("distance_ch"))
    eng.overlay = types.SimpleNamespace(release=lambda: released.append("overlay"))
    eng._iso_gpu = {"duration": object()}
    a, b = (7.4282, 43.7396), (7.4168, 43.7283)
    before = eng.route([a, b], overview="false")["routes"][0]["duration"]
    with eng as same:
        assert same is eng
    assert sorted(released) == ["ch", "distance_ch", "overlay"] and eng._iso_gpu == {}
    eng.overlay = None
    eng.close()  # idempotent
    assert eng.route([a, b], overview="false")["routes"][0]["duration"] == before


@pytest.mark.gpu
def test_close_frees_the_device_memory():
    from gpuroute.backend import gpu_available

    if not gpu_available():
        pytest.skip("needs CuPy and a CUDA GPU")
    import cupy as cp

    eng = Engine.open("monaco")
    pts = [(7.4282, 43.7396), (7.4168, 43.7283), (7.4200, 43.7350)]
    eng.table(pts)  # the hierarchy's table runs on the GPU: its device copy is made
    assert eng.ch._gpu is not None
    pool = cp.get_default_memory_pool()
    held = pool.total_bytes()
    eng.close()
    assert eng.ch._gpu is None and eng.ch._gpu_lab is None
    assert pool.total_bytes() < held
    assert eng.table(pts)["code"] == "Ok"  # made again on use
