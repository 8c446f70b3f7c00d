"""Time limits of the tour searches: a deadline, checked between calls of bounded work.

A time limit is a promise (users schedule around it), so no step of a search runs unchecked for a time
that grows with the instance. Every compiled step that grows with n takes a **work budget** and returns
the work it did (units of about one delta evaluation; :mod:`.local_search` and :mod:`.cvrp` say what a
step costs). The host loop asks a :class:`Pacer` for the next budget, which reads the clock (one
*deadline check*), measures the work rate of the last call, and sizes the next call to about
``TOUR_CHECK_SLICE_S`` seconds, never more than the time left and never more than
``TOUR_CHECK_WORK`` units; a call overruns its budget by at most one indivisible step (one evaluation of
the neighbourhood and one move). On the GPU the same rule holds with the device clock: each launch gets
the time left, and every block reads ``%globaltimer`` before each move.

Compilation is not part of the budget: :func:`gpuroute.tours.warm_up` compiles (or loads from numba's
cache, and on the GPU from CuPy's) every kernel a search uses on a tiny instance, once per process; the
searches call it before their clock starts and report its seconds apart (``stats["warmup_seconds"]``).

Every clock reading goes through :func:`clock` (tests replace it with a fake clock that advances per
reading, and count the work done between two readings).
"""
from __future__ import annotations

import math
import time

from .. import config

__all__ = ["clock", "Deadline", "Pacer", "check_time_limit", "device_budget_ns"]


def clock():
    """Seconds (``time.perf_counter``): every clock reading of the tour searches."""
    return time.perf_counter()


def check_time_limit(time_limit):
    """``time_limit`` as a float of seconds.

    Raises
    ------
    ValueError
        Not a finite number > 0 (a bool or a string is refused too), e.g. ``time_limit=0``.
    """
    ok = isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool)
    if not ok:
        try:
            import numpy as np

            ok = isinstance(time_limit, (np.integer, np.floating))
        except ImportError:  # pragma: no cover
            ok = False
    if not ok or not math.isfinite(float(time_limit)) or float(time_limit) <= 0:
        raise ValueError(f"time_limit must be a finite number of seconds > 0, got {time_limit!r}")
    return float(time_limit)


def device_budget_ns(budget_s):
    """A kernel's device-clock budget in ns (its blocks read ``%globaltimer`` before each move): 0 (no limit)
    for None, at least 1 ns otherwise."""
    return 0 if budget_s is None else max(1, int(budget_s * 1e9))


class Deadline:
    """The end of a search's time: ``time_limit`` seconds after it was made (plus :meth:`extend`).

    Attributes
    ----------
    t0, end : float
        Clock readings (seconds) of the start and of the deadline.
    limit : float
        The time limit (seconds).
    checks : int
        Deadline checks so far (:meth:`left` and :meth:`Pacer.budget` calls).
    """

    def __init__(self, time_limit):
        self.limit = float(time_limit)
        self.t0 = clock()
        self.end = self.t0 + float(time_limit)
        self.excluded = 0.0
        self.checks = 0

    def left(self):
        """Seconds left (negative once past the deadline): one deadline check."""
        self.checks += 1
        return self.end - clock()

    def extend(self, seconds):
        """Move the deadline ``seconds`` later (first-call compilation, excluded from the budget)."""
        self.end += float(seconds)
        self.excluded += float(seconds)

    def elapsed(self):
        """Seconds of the budget used since the start, excluded seconds (:meth:`extend`) left out (for
        traces and ``stats["seconds"]``)."""
        return clock() - self.t0 - self.excluded


class Pacer:
    """Work budgets for successive compiled calls under one :class:`Deadline`.

    Parameters
    ----------
    deadline : Deadline
    slice_s : float, optional
        Target seconds a call (default ``config.TOUR_CHECK_SLICE_S``).
    max_work : int, optional
        Most work units a call (default ``config.TOUR_CHECK_WORK``): the bound on the work between two
        deadline checks, whatever the clock says.
    first_work : int, optional
        Budget of the first call, before any rate is known (default ``config.TOUR_CHECK_FIRST_WORK``).
    """

    def __init__(self, deadline, slice_s=None, max_work=None, first_work=None):
        self.deadline = deadline
        self.slice_s = float(config.TOUR_CHECK_SLICE_S if slice_s is None else slice_s)
        self.max_work = int(config.TOUR_CHECK_WORK if max_work is None else max_work)
        self.first_work = int(config.TOUR_CHECK_FIRST_WORK if first_work is None else first_work)
        self.rates = {}  # work units per second of each kind of call, from the calls so far
        self._last = None  # clock reading of the previous budget
        self._kind = None  # ... its kind
        self._work = 0  # work reported since then

    def budget(self, kind="work", reserve=0.0):
        """Work units for the next call (of ``kind``: each kind of kernel keeps its own rate): 0 once the
        deadline less ``reserve`` seconds has passed (the search must stop, or go on to what the reserve
        is for), else about ``slice_s`` seconds of work at the rate measured on the calls of that kind so
        far, at most the time left, between 1 and ``max_work``. Reads the clock once (one deadline
        check)."""
        self.deadline.checks += 1
        now = clock()
        if self._last is not None and self._work > 0:
            dt = now - self._last
            if dt > 0:
                r = self._work / dt
                old = self.rates.get(self._kind)
                self.rates[self._kind] = r if old is None else 0.5 * (old + r)
        self._last = now
        self._kind = kind
        self._work = 0
        left = self.deadline.end - reserve - now
        if left <= 0:
            return 0
        rate = self.rates.get(kind)
        if rate is None:
            b = self.first_work
        else:
            b = rate * min(self.slice_s, left)
        return int(max(1, min(self.max_work, b)))

    def spent(self, work):
        """Report the work units the last call did."""
        self._work += int(work)
