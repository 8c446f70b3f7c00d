"""Bad input to the tour searches (issue 23): each rule checked on every public function it applies to
(tsp, cvrp), with the error naming the value and where it is."""
from __future__ import annotations

import numpy as np
import pytest

from gpuroute.tours import cvrp, tsp

C = np.arange(16, dtype=np.float64).reshape(4, 4)
DEM = np.array([0, 1, 2, 3])


def both(costs):
    """(name, call) for tsp and cvrp on ``costs``."""
    return [("tsp", lambda: tsp(costs, time_limit=0.05)), ("cvrp", lambda: cvrp(costs, DEM, 5, time_limit=0.05))]


@pytest.mark.parametrize("which", ["tsp", "cvrp"])
def test_non_square_matrix_names_its_shape(which):
    call = dict(both(np.ones((4, 3))))[which]
    with pytest.raises(ValueError, match=r"square.*\(4, 3\)"):
        call()


@pytest.mark.parametrize("which", ["tsp", "cvrp"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_cost_names_position_and_value(which, value):
    c = C.copy()
    c[2, 1] = value
    with pytest.raises(ValueError, match=rf"finite.*costs\[2, 1\] = {value}"):
        dict(both(c))[which]()


@pytest.mark.parametrize("which", ["tsp", "cvrp"])
def test_negative_cost_names_position_and_value(which):
    c = C.copy()
    c[3, 0] = -7
    with pytest.raises(ValueError, match=r"non-negative.*costs\[3, 0\] = -7"):
        dict(both(c))[which]()


@pytest.mark.parametrize("dem,match", [([0, 1, -2, 3], r"non-negative.*demands\[2\] = -2"),
                                       ([0, 1, np.nan, 3], r"finite.*demands\[2\] = nan"),
                                       ([0, 1, 2, 9], r"demands\[3\] = 9 exceeds the capacity 5"),
                                       ([0, 1, 2], r"demands must have shape \(4,\).*\(3,\)")])
def test_demands(dem, match):
    with pytest.raises(ValueError, match=match):
        cvrp(C, dem, 5, time_limit=0.05)


@pytest.mark.parametrize("depot,err,match", [(4, ValueError, r"depot=4 is out of range for 4 stops \(0..3\)"),
                                             (-1, ValueError, r"depot=-1 is out of range"),
                                             (1.0, TypeError, r"depot must be a stop index"),
                                             (1, ValueError, r"demands\[depot\] must be 0; demands\[1\] = 1")])
def test_depot(depot, err, match):
    with pytest.raises(err, match=match):
        cvrp(C, DEM, 5, depot=depot, time_limit=0.05)


@pytest.mark.parametrize("cap,err", [(0, ValueError), (-1, ValueError), (np.inf, ValueError), ("5", TypeError)])
def test_capacity(cap, err):
    with pytest.raises(err, match="capacity"):
        cvrp(C, DEM, cap, time_limit=0.05)


@pytest.mark.parametrize("which", ["tsp", "cvrp"])
def test_non_numeric_matrix(which):
    with pytest.raises(TypeError, match="dtype"):
        dict(both(np.full((4, 4), "a")))[which]()
