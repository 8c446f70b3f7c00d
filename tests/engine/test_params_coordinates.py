"""``gpuroute.engine.params.check_coordinates``: a request's few pairs are checked one by one in Python (the
short path), longer lists by array passes; both give the same array and the same error, naming the same
index, for every kind of input."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gpuroute.engine import EngineError
from gpuroute.engine import params as P

CASES = [
    [(7.42, 43.73), (7.43, 43.74)],
    [[7, 43], [8, 44]],
    ((7.42, 43.73), (-180.0, 90.0), (180, -90)),
    np.array([[7.42, 43.73], [7.43, 43.74]]),
    np.array([[7, 43], [8, 44]], dtype=np.int32),
    [("7.42", "43.73"), (7.43, 43.74)],
    [(True, 43.0), (7.0, 43.0)],
    [(7.42, 43.73), (math.nan, 43.0)],
    [(7.42, 43.73), (7.0, math.inf)],
    [(7.42, 43.73), (181.0, 43.0)],
    [(7.42, 43.73), (7.0, -90.5)],
    [(7.42, 43.73), (7.0,)],
    [(7.42, 43.73), (7.0, 43.0, 1.0)],
    [(7.42, 43.73), "7,43"],
    [(7.42, 43.73), ("a", 43.0)],
    [(7.42, 43.73), None],
    [(200.0, 43.0), (7.0,)],
    np.array([[7.42, 43.73], [np.nan, 1.0]]),
    np.array([[7.42, 43.73], [190.0, 1.0]]),
]


def _outcome(coords):
    try:
        a = P.check_coordinates(coords)
    except EngineError as e:
        return ("error", e.code, str(e))
    assert a.dtype == np.float64 and a.flags.c_contiguous and not a.flags.writeable
    return ("ok", a.shape, a.tolist())


@pytest.mark.parametrize("coords", CASES, ids=[str(i) for i in range(len(CASES))])
def test_short_path_is_the_array_path(monkeypatch, coords):
    short = _outcome(coords)
    monkeypatch.setattr(P, "_FEW_COORDINATES", 0)  # every input through the array passes
    assert short == _outcome(coords)
