"""Shared test setup: ``tests/`` on sys.path so every test module can ``from naive import ...`` (the
oracles), and the one way to reach the shared real data (``../shared/data`` beside the checkout, as on CI):
``from conftest import shared_data``.

Environment
-----------
GPUROUTE_SHARED_DATA
    Another folder to read the shared real data from (default: ``../shared/data`` beside the checkout).
    Point it at a folder that does not exist to run the suite as a bare clone would.
GPUROUTE_REQUIRE_SHARED_DATA
    Set (to anything but ``""`` or ``0``) where the data must be there, as on CI: a missing file then fails
    the test instead of skipping it.
GPUROUTE_BUILD_WARMUP
    Set to ``0`` here (unless set already): ``gpuroute build`` skips its warm-up in the tests.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# `gpuroute build` compiles every service's kernels at its end (gpuroute.cli.warmup): the tests that build a
# dataset are not about that (tests/cli/test_warmup.py is), and with a bare clone's empty numba cache it takes minutes
os.environ.setdefault("GPUROUTE_BUILD_WARMUP", "0")

#: The shared real data: ``$GPUROUTE_SHARED_DATA``, else ``../shared/data`` beside the checkout.
SHARED_DATA = Path(os.environ.get("GPUROUTE_SHARED_DATA")
                   or Path(__file__).resolve().parents[2] / "shared" / "data")


def shared_data(*parts: str) -> Path:
    """The path of ``parts`` under the shared real data, or skip the calling test with the reason.

    Call it inside a test (or a fixture), never at module level: a missing file skips that test only.
    With ``GPUROUTE_REQUIRE_SHARED_DATA`` set, a missing file fails the test instead.

    Parameters
    ----------
    *parts : str
        Path components below the data folder, e.g. ``shared_data("dimacs9", "rome99.gr.gz")``.

    Returns
    -------
    pathlib.Path
        The existing file or folder.
    """
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        reason = f"{path} is absent: the shared real data (../shared/data beside the checkout) is needed"
        if os.environ.get("GPUROUTE_REQUIRE_SHARED_DATA", "") not in ("", "0"):
            pytest.fail(f"{reason} (GPUROUTE_REQUIRE_SHARED_DATA is set)")
        pytest.skip(reason)
    return path


class LineBudgetExceeded(Exception):
    """Raised inside the code under test once it has run more Python lines than its budget allows."""


class LineBudget:
    """Count the Python lines this thread executes inside ``with``, and stop the code past ``limit``.

    An operation count for tests that must not depend on wall time: "rejected at once" becomes "rejected
    within ``limit`` Python lines", which a loop over a huge announced count breaks at once, on any
    machine and under any load. Lines run by compiled code (NumPy, numba) are not counted; pair the budget
    with ``tracemalloc`` for allocations.

    The line past the limit raises :class:`LineBudgetExceeded` in the code (which stops a runaway loop;
    Python then turns the tracing off), and leaving the block raises ``AssertionError`` with the count,
    even where the code caught that exception.

    Examples
    --------
    >>> with LineBudget(50_000) as ops:
    ...     parse(path)
    >>> ops.lines  # the count
    """

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.lines = 0
        self._previous = None

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines += 1
            if self.lines > self.limit:
                raise LineBudgetExceeded(f"more than {self.limit} Python lines")
        return self._local

    def _global(self, frame, event, arg):
        return self._local

    def __enter__(self):
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, exc_type, exc, tb):
        sys.settrace(self._previous)
        if self.lines > self.limit:
            raise AssertionError(f"the code ran {self.lines} Python lines, over its budget of {self.limit} "
                                 "(it stopped there)") from exc
        return False


@pytest.fixture(scope="session")
def monaco_car_dir(tmp_path_factory):
    """Monaco built once per session with OSRM's own ``car.lua`` (run unchanged by the Lua runtime; overlay
    cells 64 and 1024): the dataset of the tests that need car.lua's turn costs, classes and weights (map
    matching, ...). Read-only: a test that changes its traffic drops it again (``drop_traffic``). Skips
    without osmium, lupa or OSRM's profiles."""
    pytest.importorskip("osmium")
    pytest.importorskip("lupa", reason="lupa (pip install 'gpuroute[lua]') runs OSRM's car.lua")
    from osrm_peer import osrm_bin_dir, osrm_profiles_dir

    from gpuroute.pipeline import build_dataset

    lua = osrm_profiles_dir(osrm_bin_dir(required=False)) / "car.lua"
    d = tmp_path_factory.mktemp("ds") / "monaco-car"
    build_dataset(Path(__file__).resolve().parents[1] / "src" / "gpuroute" / "datasets" / "data" / "monaco.osm.pbf",
                  d, profile=lua, cell_sizes=(64, 1024))
    return d


def write_grid_dimacs(directory, name, k, lon0, lat0=1.0, step=0.001):
    """A ``k`` x ``k`` grid of two-way streets ``step`` degrees apart from (``lon0``, ``lat0``), written as the
    DIMACS travel-time graph ``USA-road-t.<name>.gr`` with its ``.co`` in ``directory``; weight ``100 + row +
    column`` both ways. Returns the ``.gr`` path."""
    from pathlib import Path as _Path

    d = _Path(directory)
    arcs = []
    for r in range(k):
        for c in range(k):
            v = r * k + c + 1
            for dr, dc in ((0, 1), (1, 0)):
                if r + dr < k and c + dc < k:
                    u = (r + dr) * k + c + dc + 1
                    arcs += [(v, u, 100 + r + c), (u, v, 100 + r + c)]
    gr = d / f"USA-road-t.{name}.gr"
    gr.write_text(f"p sp {k * k} {len(arcs)}\n" + "".join(f"a {a} {b} {w}\n" for a, b, w in arcs))
    (d / f"USA-road-t.{name}.co").write_text(f"p aux sp co {k * k}\n" + "".join(
        f"v {r * k + c + 1} {round((lon0 + c * step) * 1e6)} {round((lat0 + r * step) * 1e6)}\n"
        for r in range(k) for c in range(k)))
    return gr
