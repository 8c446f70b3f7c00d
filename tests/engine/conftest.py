"""Fixtures shared by the engine tests that need a built Monaco dataset with an overlay: built once per
session (``gpuroute build monaco --cell-sizes 64,1024``), and an engine over it that starts from the built
metric (saved traffic dropped before and after each test)."""
from __future__ import annotations

import contextlib
import io

import pytest

#: Overlay cell sizes of the shared Monaco dataset.
OVERLAY_CELLS = (64, 1024)


@pytest.fixture(scope="session")
def monaco_overlay_dir(tmp_path_factory):
    """The dataset directory (built once per session)."""
    pytest.importorskip("osmium")
    from gpuroute.cli.main import main

    d = tmp_path_factory.mktemp("ds") / "monaco"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["build", "monaco", "-o", str(d), "--cell-sizes", ",".join(map(str, OVERLAY_CELLS))]) == 0
    return d


@pytest.fixture
def overlay_engine(monaco_overlay_dir):
    """An Engine over :func:`monaco_overlay_dir` on the built metric; its saved traffic dropped after."""
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import drop_traffic

    drop_traffic(monaco_overlay_dir)
    e = Engine.open(monaco_overlay_dir)
    yield e
    drop_traffic(monaco_overlay_dir)


@pytest.fixture(scope="module")
def car_engine(monaco_car_dir):
    """Monaco with OSRM's car.lua (its U-turn penalty and turn costs: the driver's rules map matching needs): the
    session's dataset (tests/conftest.py), saved traffic dropped, up to 1,000 trace points a request."""
    from gpuroute.engine import Engine
    from gpuroute.engine.dataset import drop_traffic

    drop_traffic(monaco_car_dir)
    e = Engine.open(monaco_car_dir)
    e.limits["max_locations_map_matching"] = 1000
    return e
