"""Departure-time routing (issue 22, deliverable 2): a time profile of speeds per road class, OSM way or arc
per time slot, and the customized metric of each slot, cached.

The model: slot-at-departure
----------------------------
A request with ``depart_at`` is answered on the metric of the time slot that contains the departure time,
applied to the WHOLE request (every leg of a route, every cell of a table, every arc of an isochrone, a
trip's matrix and legs): a route that leaves at 07:59 and arrives at 08:20 pays the 07:45-08:00 slot's
costs all the way. That slot's metric is one customization of the overlay (the customization
``/customize`` runs, on the GPU where one is usable), made at the first request of the slot and cached.
(Time-dependent costs along the route, the arrival time at each arc choosing its slot, are not
implemented.)

The profile file (CSV; Parquet where pandas and pyarrow are installed)
-----------------------------------------------------------------------
::

    # timezone: Europe/Monaco
    # slot_minutes: 15
    day,start,end,road_class,way_id,arc,speed_kmh,factor
    weekday,07:00,09:30,primary,,,25,
    weekday,17:00,19:00,,4227272,,,1.5
    weekend,00:00,24:00,motorway,,,110,
    mon,08:00,08:15,,,1203,12,

* **Metadata** (comment lines ``# key: value`` before the header; Parquet: the schema's key-value
  metadata, same keys): ``timezone`` (required: an IANA zone name read by :mod:`zoneinfo`, e.g.
  ``Europe/Monaco``, or ``UTC``, or a fixed offset ``+01:00`` / ``-05:30``); ``slot_minutes`` (an integer
  that divides 1440; default 15: 96 slots a day); ``valid_from`` / ``valid_until`` (optional local dates
  ``YYYY-MM-DD``, inclusive: the calendar's first and last day). Other comment lines are ignored.
* **Header** (required; columns in any order; a file holds only the columns it uses):
  ``day`` (``mon`` ... ``sun``, ``weekday`` = mon-fri, ``weekend`` = sat-sun, ``all``); the time of
  day as ``start`` and ``end`` (``HH:MM`` local wall-clock time, each a multiple of ``slot_minutes``,
  ``start < end``, ``end`` may be ``24:00``; the row covers the slots in ``[start, end)``; a range past
  midnight is two rows) or as ``slot`` (one slot index in ``[0, 1440 / slot_minutes)``); the key, exactly
  one per row, of ``road_class`` (a name of the dataset's ``graph.meta["road_classes"]``: the ``highway``
  value for gpuroute's native profile, OSRM's road priority class -- ``motorway``, ``primary``,
  ``link_road``, ... -- for a graph read with an OSRM Lua profile), ``way_id`` (an OSM way id of the
  dataset: both directions of the way) and ``arc`` (an arc id of the dataset); the value, exactly one per
  row, of ``speed_kmh`` (a number > 0, km/h: the arc's travel time is OSRM's ``round(10 * length_m /
  (speed / 3.6))`` deciseconds, at least 1, as a ``/customize`` speed update) and ``factor`` (a number > 0
  multiplying the arc's cost in the built metric: 1.5 = half as fast again).
* **Which row wins** on an arc in a slot: the most specific key (``arc`` over ``way_id`` over
  ``road_class``), then the most specific day (a named day over ``weekday``/``weekend`` over ``all``). Two
  rows of the same key and the same day kind that cover one slot are refused (naming both lines). An arc no
  row covers in a slot keeps its cost in the current metric.
* **Calendar**: the days of the week some row covers (a day no row covers is outside the calendar), within
  ``valid_from`` .. ``valid_until`` where given. ``depart_at`` outside it: ``InvalidValue``.

Every bad line is refused with the file, the line (Parquet: the row, from 1) and the field:
:class:`TimeProfileError` (a ``ValueError``).

``depart_at``
-------------
ISO 8601 date and time (``2026-11-26T08:00``, with seconds, with an offset ``+01:00`` / ``Z``), a
:class:`datetime.datetime`, or ``"now"``. With an offset (or an aware datetime) it is converted to the
profile's zone; without one it is the wall-clock time in the profile's zone (Valhalla's ``date_time``: the
local time at the origin). The slot is ``minute of the local day // slot_minutes`` on the local weekday;
daylight-saving time follows the zone (slots are wall-clock times). In a URL, write ``+`` as ``%2B`` (an
unencoded ``+`` reads as a space, which is taken back as ``+`` before an offset).

Live traffic (``/customize``) and the profile
---------------------------------------------
A slot's metric is derived from the overlay's CURRENT metric: every arc keeps its current cost except the
arcs the profile covers in that slot, which get the profile's cost; but an arc whose cost (or travel time)
``/customize`` changed from the built metric keeps its live value in every slot (a live report, a closure
included, overrides the profile). Turn costs are the current metric's. A slot's cached metric is valid for
one customization state of the overlay: after a ``/customize`` it is stale and customized again at its
next use (the policy of :mod:`gpuroute.engine.exclude`). Speed rows need a time metric (or a Lua profile's
weight, e.g. ``routability``, whose weight is then OSRM's ``length / (speed / 3.6)`` and whose durations
follow the speed); on another metric (``distance``) ``depart_at`` is ``InvalidValue``.

Cost and cache
--------------
Slots (day, slot index) whose rows are the same share one metric (at most 7 x 96 with 15-minute slots,
usually a handful); a slot with no row is answered as without ``depart_at`` (the current metric, no
customization). A slot's first request pays ONE whole customization of the overlay (as ``exclude=``;
Monaco: 11 ms with one numba thread on a loaded 2-core machine, 1.5-2 ms with both cores free, 0.7 ms on
an H200 as measured for ``exclude=``; ``benchmarks/depart.py``); later requests of that slot pay a
dictionary lookup (rows that change no cost, e.g. ``factor`` 1: no customization at all). Kept:
``config.SERVE_DEPART_CACHE`` slot metrics (least recently used dropped first; with ``exclude=`` or avoids
a (slot, exclusion) pair is one entry), each the memory of one customization (cliques, trees, decoded turn
costs, arc costs: :meth:`TimeSlots.info`'s ``bytes_per_metric``; Monaco 1.6 MiB).
:attr:`TimeSlots.stats` counts ``customizations``, ``hits``, ``misses``, ``evicted``.

What the model misses (``benchmarks/depart.py --td``: the routes re-timed arc by arc, and a time-dependent
Dijkstra's optimum): on Monaco's rush-hour profile the reported duration of a trip that crosses a slot
boundary is off by up to ~19 % (median 0), the route itself at most ~5 % slower than the time-dependent
optimum (BENCHMARKS.md).
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .. import config
from .osrm import EngineError

__all__ = ["TimeProfile", "TimeProfileError", "TimeSlots", "Departure", "parse_depart_at", "departure",
           "DAYS", "KEYS", "VALUES", "SLOT_MINUTES", "STORED", "stored_profile", "store_profile",
           "remove_stored_profile", "check_profile", "stored_profile_of", "profile_bytes"]

#: Day names of the ``day`` column and the weekdays (Monday = 0) each covers.
DAYS = {"mon": (0,), "tue": (1,), "wed": (2,), "thu": (3,), "fri": (4,), "sat": (5,), "sun": (6,),
        "weekday": (0, 1, 2, 3, 4), "weekend": (5, 6), "all": (0, 1, 2, 3, 4, 5, 6)}
#: How specific each day name is (a named day beats weekday/weekend beats all).
_DAY_LEVEL = {"all": 0, "weekday": 1, "weekend": 1}
#: Key columns, least specific first (the index is the key kind).
KEYS = ("road_class", "way_id", "arc")
#: Value columns (the index is the value kind).
VALUES = ("speed_kmh", "factor")
#: ``slot_minutes`` where the file names none.
SLOT_MINUTES = 15
_WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_META_KEYS = ("timezone", "slot_minutes", "valid_from", "valid_until")
_META = re.compile(r"#\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$")
_HHMM = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_OFFSET = re.compile(r"([+-])([0-9]{2}):?([0-9]{2})")
_SPACE_OFFSET = re.compile(r"(T[0-9:.]+) ([0-9]{2}(?::?[0-9]{2})?)$")


class TimeProfileError(ValueError):
    """A time profile that cannot be read; the message names the file, the line and the field."""


# ------------------------------------------------------------------------------------------ depart_at
def parse_depart_at(value):
    """The checked ``depart_at``: an aware or naive :class:`datetime.datetime` (naive: wall-clock time in the
    profile's zone), or None for None.

    Parameters
    ----------
    value : str, datetime.datetime or None
        ISO 8601 date and time (``YYYY-MM-DDTHH:MM[:SS[.fff]][Z|+HH:MM]``; a space for ``T`` too), a
        datetime, or ``"now"`` (the current UTC time).

    Raises
    ------
    EngineError
        ``InvalidValue`` naming the value (not a date and time, a date without a time).
    """
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value
    if isinstance(value, str):
        s = value.strip()
        if s == "now":
            return _dt.datetime.now(_dt.timezone.utc)
        s = _SPACE_OFFSET.sub(r"\1+\2", s)  # a URL's unencoded '+' read as a space
        if len(s) > 10 and s[10] in "Tt ":
            try:
                return _dt.datetime.fromisoformat(s)
            except ValueError:
                pass
    raise EngineError("InvalidValue", f"depart_at {value!r} is not an ISO 8601 date and time (e.g. "
                                      "2026-11-26T08:00 or 2026-11-26T08:00+01:00)")


# ------------------------------------------------------------------------------------------ the profile
def _zone(text, where):
    m = _OFFSET.fullmatch(text)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        h, mi = int(m.group(2)), int(m.group(3))
        if h > 23 or mi > 59:
            raise TimeProfileError(f"{where}: timezone {text!r} is not an offset +HH:MM")
        return _dt.timezone(sign * _dt.timedelta(hours=h, minutes=mi))
    if text.upper() == "UTC" or text == "Z":
        return _dt.timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimeProfileError(f"{where}: timezone {text!r} is neither an IANA zone (e.g. Europe/Monaco) nor an "
                               "offset +HH:MM") from None


class TimeProfile:
    """A time profile as read from its file (no graph yet: :class:`TimeSlots` binds it to an engine).

    Attributes
    ----------
    path : str
    tz : datetime.tzinfo
    timezone : str
        As the file names it.
    slot_minutes : int
    n_slots : int
        Slots a day (``1440 // slot_minutes``).
    valid_from, valid_until : datetime.date or None
    days : int
        Bit ``d`` set: weekday ``d`` (Monday 0) is in the calendar.
    rows : dict of ndarray (R,)
        ``mask`` int64 (weekday bits), ``level`` int8 (day specificity), ``lo``/``hi`` int64 (slots
        ``[lo, hi)``), ``key_kind`` int8 (index into :data:`KEYS`), ``key`` int64 (a way id, an arc id, or an
        index into :attr:`class_names`), ``value_kind`` int8 (index into :data:`VALUES`), ``value``
        float64, ``line`` int64 (the file's line, Parquet's row from 1).
    class_names : list of str
        The road class names the rows use.
    variant : ndarray int64 (7, n_slots)
        Each (weekday, slot)'s variant: slots whose rows are the same share one; -1 outside the calendar.
    variant_rows : list of ndarray int64
        The rows of each variant.
    """

    def __init__(self, path, tz, timezone, slot_minutes, valid_from, valid_until, rows, class_names):
        self.path = str(path)
        self.tz = tz
        self.timezone = timezone
        self.slot_minutes = int(slot_minutes)
        self.n_slots = 1440 // self.slot_minutes
        self.valid_from = valid_from
        self.valid_until = valid_until
        self.rows = rows
        self.class_names = class_names
        self.days = int(np.bitwise_or.reduce(rows["mask"])) if rows["mask"].size else 0
        self._check_overlaps()
        self._variants()

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, path):
        """Read a profile file (``.csv``; ``.parquet`` with pandas and pyarrow).

        Raises
        ------
        FileNotFoundError
        TimeProfileError
            A bad header, metadata or row (the message names the file, the line and the field), two rows
            of the same key and day kind covering one slot, no row at all.
        ImportError
            A Parquet file without pandas / pyarrow (:class:`gpuroute.extras.MissingExtraError` naming the
            package).
        """
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"time profile {str(path)!r}: no such file")
        if p.suffix.lower() in (".parquet", ".pq"):
            return cls._read_parquet(p)
        return cls._read_csv(p)

    @classmethod
    def _read_csv(cls, p):
        meta, header, body = {}, None, []
        with open(p, newline="", encoding="utf-8-sig") as fh:
            for no, line in enumerate(fh, 1):
                s = line.strip()
                if not s:
                    continue
                if s.startswith("#"):
                    m = _META.fullmatch(s)
                    if m and header is None and m.group(1).lower() in _META_KEYS:
                        key = m.group(1).lower()
                        if key in meta:
                            raise TimeProfileError(f"{p}:{no}: {key} given twice (first on line {meta[key][1]})")
                        meta[key] = (m.group(2), no)
                    continue
                fields = next(csv.reader([line]))
                if header is None:
                    header = ([f.strip() for f in fields], no)
                else:
                    body.append((no, [f.strip() for f in fields]))
        if header is None:
            raise TimeProfileError(f"{p}: no header line (e.g. day,start,end,road_class,speed_kmh)")
        return cls._build(p, meta, header[0], header[1], body, "line")

    @classmethod
    def _read_parquet(cls, p):
        from ..extras import require

        pd = require("pandas", "parquet")
        pq = require("pyarrow.parquet", "parquet")
        raw = pq.read_schema(p).metadata or {}
        meta = {}
        for k, v in raw.items():
            key = k.decode("utf-8", "replace").lower()
            if key in _META_KEYS:
                meta[key] = (v.decode("utf-8", "replace"), 0)
        df = pd.read_parquet(p)
        cols = [str(c) for c in df.columns]

        def text(x):
            if x is None or (isinstance(x, float) and math.isnan(x)):
                return ""
            if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
                return str(int(x))  # an integer column with gaps reads as floats
            if isinstance(x, _dt.time):
                return x.strftime("%H:%M")
            return str(x)

        body = [(i + 1, [text(x) for x in r]) for i, r in enumerate(df.itertuples(index=False, name=None))]
        return cls._build(p, meta, cols, 0, body, "row")

    @classmethod
    def _build(cls, p, meta, header, header_line, body, unit):
        where_h = f"{p}:{header_line}" if header_line else f"{p}"
        # metadata
        if "timezone" not in meta:
            raise TimeProfileError(f"{p}: no timezone (a line '# timezone: Europe/Monaco' or '# timezone: +01:00' "
                                   "before the header; Parquet: schema metadata 'timezone')")
        tz_text, tz_line = meta["timezone"]
        tz = _zone(tz_text, f"{p}:{tz_line}" if tz_line else str(p))
        slot_minutes = SLOT_MINUTES
        if "slot_minutes" in meta:
            v, ln = meta["slot_minutes"]
            if not (v.isdigit() and 1 <= int(v) <= 1440 and 1440 % int(v) == 0):
                raise TimeProfileError(f"{p}:{ln}: slot_minutes {v!r} must be an integer that divides 1440 "
                                       "(15: 96 slots a day)")
            slot_minutes = int(v)
        dates = {}
        for k in ("valid_from", "valid_until"):
            if k in meta:
                v, ln = meta[k]
                try:
                    dates[k] = _dt.date.fromisoformat(v)
                except ValueError:
                    raise TimeProfileError(f"{p}:{ln}: {k} {v!r} is not a date YYYY-MM-DD") from None
        if "valid_from" in dates and "valid_until" in dates and dates["valid_from"] > dates["valid_until"]:
            raise TimeProfileError(f"{p}: valid_from {dates['valid_from']} is after valid_until {dates['valid_until']}")
        # header
        known = {"day", "start", "end", "slot", *KEYS, *VALUES}
        col = {}
        for i, h in enumerate(header):
            if h not in known:
                raise TimeProfileError(f"{where_h}: unknown column {h!r} (columns: day, start and end or slot, "
                                       f"one or more of {', '.join(KEYS)}, one or more of {', '.join(VALUES)})")
            if h in col:
                raise TimeProfileError(f"{where_h}: column {h!r} given twice")
            col[h] = i
        if "day" not in col:
            raise TimeProfileError(f"{where_h}: no 'day' column")
        by_range = "start" in col or "end" in col
        if by_range == ("slot" in col) or (by_range and not ("start" in col and "end" in col)):
            raise TimeProfileError(f"{where_h}: give the time of day as 'start' and 'end' (HH:MM) or as 'slot', "
                                   "not both")
        keys = [k for k in KEYS if k in col]
        vals = [v for v in VALUES if v in col]
        if not keys or not vals:
            raise TimeProfileError(f"{where_h}: needs a key column ({', '.join(KEYS)}) and a value column "
                                   f"({', '.join(VALUES)})")
        n_slots = 1440 // slot_minutes
        out = {k: [] for k in ("mask", "level", "lo", "hi", "key_kind", "key", "value_kind", "value", "line")}
        class_ix = {}
        for no, f in body:
            at = f"{p}:{no}" if unit == "line" else f"{p} row {no}"
            if len(f) != len(header):
                raise TimeProfileError(f"{at}: {len(f)} fields, the header has {len(header)}")
            day = f[col["day"]].lower()
            if day not in DAYS:
                raise TimeProfileError(f"{at}: day {f[col['day']]!r} is not one of {', '.join(DAYS)}")
            if by_range:
                lo = _minute(f[col["start"]], at, "start", slot_minutes)
                hi = _minute(f[col["end"]], at, "end", slot_minutes)
                if not lo < hi:
                    raise TimeProfileError(f"{at}: start {f[col['start']]} is not before end {f[col['end']]} (a "
                                           "range past midnight is two rows)")
                lo //= slot_minutes
                hi //= slot_minutes
            else:
                s = f[col["slot"]]
                if not (s.isdigit() and int(s) < n_slots):
                    raise TimeProfileError(f"{at}: slot {s!r} is not a slot index in [0, {n_slots})")
                lo, hi = int(s), int(s) + 1
            given = [k for k in keys if f[col[k]] != ""]
            if len(given) != 1:
                raise TimeProfileError(f"{at}: a row names exactly one of {', '.join(keys)}, got "
                                       f"{', '.join(given) or 'none'}")
            kk = given[0]
            kv = f[col[kk]]
            if kk == "road_class":
                key = class_ix.setdefault(kv, len(class_ix))
            else:
                try:
                    key = int(kv)
                except ValueError:
                    key = -1
                if key < 0 or str(key) != kv.lstrip("+"):
                    raise TimeProfileError(f"{at}: {kk} {kv!r} is not {'an OSM way id' if kk == 'way_id' else 'an arc id'}"
                                           " (an integer >= 0)")
            given = [v for v in vals if f[col[v]] != ""]
            if len(given) != 1:
                raise TimeProfileError(f"{at}: a row gives exactly one of {', '.join(vals)}, got "
                                       f"{', '.join(given) or 'none'}")
            vk = given[0]
            try:
                x = float(f[col[vk]])
            except ValueError:
                x = math.nan
            if not (math.isfinite(x) and x > 0):
                raise TimeProfileError(f"{at}: {vk} {f[col[vk]]!r} must be a number > 0"
                                       + (" (km/h)" if vk == "speed_kmh" else ""))
            mask = 0
            for d in DAYS[day]:
                mask |= 1 << d
            out["mask"].append(mask)
            out["level"].append(_DAY_LEVEL.get(day, 2))
            out["lo"].append(lo)
            out["hi"].append(hi)
            out["key_kind"].append(KEYS.index(kk))
            out["key"].append(key)
            out["value_kind"].append(VALUES.index(vk))
            out["value"].append(x)
            out["line"].append(no)
        if not out["line"]:
            raise TimeProfileError(f"{p}: no rows (a profile needs at least one)")
        dtypes = {"mask": np.int64, "level": np.int8, "lo": np.int64, "hi": np.int64, "key_kind": np.int8,
                  "key": np.int64, "value_kind": np.int8, "value": np.float64, "line": np.int64}
        rows = {k: np.asarray(v, dtype=dtypes[k]) for k, v in out.items()}
        names = sorted(class_ix, key=class_ix.get)
        prof = cls(p, tz, tz_text, slot_minutes, dates.get("valid_from"), dates.get("valid_until"), rows, names)
        prof._unit = unit
        return prof

    # ------------------------------------------------------------------ structure
    def _where(self, row):
        ln = int(self.rows["line"][row])
        return f"{self.path}:{ln}" if getattr(self, "_unit", "line") == "line" else f"{self.path} row {ln}"

    def _cells(self):
        """Every (row, cell) a row covers: ``(row int64 (k,), cell int64 (k,))``, cell = weekday * n_slots +
        slot."""
        r = self.rows
        days = np.array([[(m >> d) & 1 for d in range(7)] for m in range(128)], dtype=bool)
        nth = np.full((128, 7), -1, np.int64)
        for m in range(128):
            ds = np.flatnonzero(days[m])
            nth[m, :ds.size] = ds
        width = r["hi"] - r["lo"]
        per = days[r["mask"]].sum(axis=1) * width
        row = np.repeat(np.arange(per.size, dtype=np.int64), per)
        off = np.arange(row.size, dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
        w = width[row]
        day = nth[r["mask"][row], off // w]
        slot = r["lo"][row] + off % w
        return row, day * self.n_slots + slot

    def _check_overlaps(self):
        """Two rows of the same key and day kind covering one slot: TimeProfileError naming both lines."""
        r = self.rows
        row, cell = self._cells()
        order = np.lexsort((row, cell, r["level"][row], r["key"][row], r["key_kind"][row]))
        row, cell = row[order], cell[order]
        same = ((r["key_kind"][row[1:]] == r["key_kind"][row[:-1]]) & (r["key"][row[1:]] == r["key"][row[:-1]])
                & (r["level"][row[1:]] == r["level"][row[:-1]]) & (cell[1:] == cell[:-1]))
        if same.any():
            i = int(np.flatnonzero(same)[0])
            a, b = int(row[i]), int(row[i + 1])
            d, s = divmod(int(cell[i]), self.n_slots)
            kk = KEYS[int(r["key_kind"][a])]
            kv = self.class_names[int(r["key"][a])] if kk == "road_class" else int(r["key"][a])
            m = s * self.slot_minutes
            raise TimeProfileError(f"{self._where(b)}: {kk} {kv} on {_WEEKDAY_NAMES[d]} at {m // 60:02d}:{m % 60:02d} "
                                   f"is covered already by line {int(r['line'][a])} (same key, same kind of day)")
        self._row_cell = (row, cell)

    def _variants(self):
        """:attr:`variant` and :attr:`variant_rows` (slots with the same rows share a variant)."""
        row, cell = self._row_cell
        order = np.lexsort((row, cell))
        row, cell = row[order], cell[order]
        n = 7 * self.n_slots
        bounds = np.searchsorted(cell, np.arange(n + 1))
        seen = {}
        self.variant_rows = []
        var = np.full(n, -1, np.int64)
        for c in range(n):
            d = c // self.n_slots
            if not (self.days >> d) & 1:
                continue
            rs = row[bounds[c]:bounds[c + 1]]
            k = rs.tobytes()
            v = seen.get(k)
            if v is None:
                v = seen[k] = len(self.variant_rows)
                self.variant_rows.append(rs)
            var[c] = v
        self.variant = var.reshape(7, self.n_slots)
        del self._row_cell

    # ------------------------------------------------------------------ time
    def slot_of(self, when):
        """``(variant, weekday, slot, local datetime)`` of a departure time.

        Parameters
        ----------
        when : datetime.datetime
            Aware (converted to the profile's zone) or naive (wall-clock time in the profile's zone).

        Raises
        ------
        EngineError
            ``InvalidValue``: outside the calendar (a day no row covers, a date outside ``valid_from`` ..
            ``valid_until``).
        """
        local = when.astimezone(self.tz) if when.tzinfo is not None else when
        if self.valid_from is not None and local.date() < self.valid_from or \
                self.valid_until is not None and local.date() > self.valid_until:
            raise EngineError("InvalidValue", f"depart_at {when.isoformat()} is outside the time profile's calendar "
                                              f"({self.valid_from or '...'} to {self.valid_until or '...'}, "
                                              f"{self.timezone})")
        d = local.weekday()
        s = (local.hour * 60 + local.minute) // self.slot_minutes
        v = int(self.variant[d, s])
        if v < 0:
            covered = ",".join(n for i, n in enumerate(_WEEKDAY_NAMES) if (self.days >> i) & 1)
            raise EngineError("InvalidValue", f"depart_at {when.isoformat()} is outside the time profile's calendar: "
                                              f"it is a {local.strftime('%A')} in {self.timezone} and the profile "
                                              f"covers {covered} only")
        return v, d, s, local

    def to_csv(self):
        """The profile as CSV text (the format in the module notes): its metadata lines, then one row per row
        of the profile in its order, ``day,start,end,road_class,way_id,arc,speed_kmh,factor`` (the time of day
        as ``start``/``end``, values as Python writes floats: read back exactly). What :func:`store_profile`
        stores for a Parquet file."""
        by_mask = {}
        for name, ds in DAYS.items():
            by_mask.setdefault(sum(1 << d for d in ds), name)
        lines = [f"# timezone: {self.timezone}", f"# slot_minutes: {self.slot_minutes}"]
        for k in ("valid_from", "valid_until"):
            v = getattr(self, k)
            if v is not None:
                lines.append(f"# {k}: {v.isoformat()}")
        lines.append("day,start,end," + ",".join(KEYS) + "," + ",".join(VALUES))
        r = self.rows

        def hhmm(slot):
            m = int(slot) * self.slot_minutes
            return f"{m // 60:02d}:{m % 60:02d}"

        for i in range(r["line"].size):
            kk, vk = int(r["key_kind"][i]), int(r["value_kind"][i])
            key = self.class_names[int(r["key"][i])] if kk == 0 else str(int(r["key"][i]))
            keys = [key if j == kk else "" for j in range(len(KEYS))]
            vals = [repr(float(r["value"][i])) if j == vk else "" for j in range(len(VALUES))]
            lines.append(",".join([by_mask[int(r["mask"][i])], hhmm(r["lo"][i]), hhmm(r["hi"][i]), *keys, *vals]))
        return "\n".join(lines) + "\n"

    def same_rows(self, other):
        """Whether ``other`` holds the same metadata and rows (lines aside)."""
        meta = ("timezone", "slot_minutes", "valid_from", "valid_until", "class_names")
        if any(getattr(self, k) != getattr(other, k) for k in meta):
            return False
        cols = [k for k in self.rows if k != "line"]
        return all(np.array_equal(self.rows[k], other.rows[k]) for k in cols)

    def info(self):
        """Plain data: ``file``, ``timezone``, ``slot_minutes``, ``days`` (names), ``valid_from``,
        ``valid_until``, ``rows``, ``variants``."""
        return {"file": self.path, "timezone": self.timezone, "slot_minutes": self.slot_minutes,
                "days": [n for i, n in enumerate(_WEEKDAY_NAMES) if (self.days >> i) & 1],
                "valid_from": None if self.valid_from is None else self.valid_from.isoformat(),
                "valid_until": None if self.valid_until is None else self.valid_until.isoformat(),
                "rows": int(self.rows["line"].size), "variants": len(self.variant_rows)}


def _minute(text, at, what, slot_minutes):
    m = _HHMM.fullmatch(text)
    if not m or int(m.group(2)) > 59 or int(m.group(1)) * 60 + int(m.group(2)) > 1440:
        raise TimeProfileError(f"{at}: {what} {text!r} is not a time of day HH:MM (00:00 .. 24:00)")
    x = int(m.group(1)) * 60 + int(m.group(2))
    if x % slot_minutes:
        raise TimeProfileError(f"{at}: {what} {text} is not on a slot boundary (slots of {slot_minutes} minutes)")
    return x


# ------------------------------------------------------------------------------------------ the engine's slots
class TimeSlots:
    """A :class:`TimeProfile` bound to one engine: its keys checked against the graph, and the customized
    metric of each slot, cached (thread-safe; see the module notes).

    Parameters
    ----------
    engine : gpuroute.engine.Engine
        With an overlay.
    profile : TimeProfile

    Attributes
    ----------
    profile : TimeProfile
    stats : dict
        ``customizations``, ``hits``, ``misses``, ``evicted``.

    Raises
    ------
    TimeProfileError
        A row whose key is not in the graph (an unknown road class, way id or arc id), speed rows on a
        graph without ``length_m`` (the message names the file and the line).
    EngineError
        ``NotImplemented``: an engine without an overlay.
    """

    def __init__(self, engine, profile):
        if engine._traffic is None:
            raise EngineError("NotImplemented", "departure-time routing needs a customized overlay: build a dataset "
                                                "with `gpuroute build GRAPH -o DIR` and open (or serve) DIR")
        self.engine = engine
        self.profile = profile
        g = engine.graph
        r = profile.rows
        m = g.n_arcs
        self._m = m
        self._length = (np.asarray(g.arc_attrs["length_m"], dtype=np.float64) if "length_m" in g.arc_attrs else None)
        if self._length is None and (r["value_kind"] == VALUES.index("speed_kmh")).any():
            i = int(np.flatnonzero(r["value_kind"] == VALUES.index("speed_kmh"))[0])
            raise TimeProfileError(f"{profile._where(i)}: speed_kmh needs the arcs' length_m, which graph "
                                   f"{g.name!r} does not have (use factor)")
        # road classes -> the graph's codes
        self._class_code = np.zeros(len(profile.class_names), np.int64)
        if profile.class_names:
            names = [str(x) for x in (g.meta.get("road_classes") or [])]
            if "road_class" not in g.arc_attrs or not names:
                i = int(np.flatnonzero(r["key_kind"] == 0)[0])
                raise TimeProfileError(f"{profile._where(i)}: graph {g.name!r} has no road classes (use way_id or arc)")
            for j, n in enumerate(profile.class_names):
                if n not in names:
                    i = int(np.flatnonzero((r["key_kind"] == 0) & (r["key"] == j))[0])
                    raise TimeProfileError(f"{profile._where(i)}: road_class {n!r} is not a road class of graph "
                                           f"{g.name!r} (its classes: {', '.join(names)})")
                self._class_code[j] = names.index(n)
            self._arc_class = np.asarray(g.arc_attrs["road_class"], dtype=np.int64)
        # way ids -> arcs (sorted)
        ways = r["key_kind"] == KEYS.index("way_id")
        if ways.any():
            if "way_id" not in g.arc_attrs:
                i = int(np.flatnonzero(ways)[0])
                raise TimeProfileError(f"{profile._where(i)}: graph {g.name!r} has no OSM way ids (use arc)")
            wid = np.asarray(g.arc_attrs["way_id"], dtype=np.int64)
            self._way_order = np.argsort(wid, kind="stable")
            self._way_sorted = wid[self._way_order]
            lo = np.searchsorted(self._way_sorted, r["key"], "left")
            hi = np.searchsorted(self._way_sorted, r["key"], "right")
            bad = ways & (lo == hi)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise TimeProfileError(f"{profile._where(i)}: way_id {int(r['key'][i])} is no way of graph {g.name!r}")
            self._way_lo, self._way_hi = lo, hi
        arcs = r["key_kind"] == KEYS.index("arc")
        bad = arcs & ((r["key"] < 0) | (r["key"] >= m))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TimeProfileError(f"{profile._where(i)}: arc {int(r['key'][i])} is not an arc id in [0, {m})")
        self._lock = threading.Lock()
        self._cache = OrderedDict()  # (variant, exclusion key) -> (base state, Snapshot)
        self._iso = OrderedDict()  # (variant, metric word, exclusion key) -> (base state, iso metric)
        self._pristine = {}  # metric name -> int64 (m,) arc costs as built
        self.stats = {"customizations": 0, "hits": 0, "misses": 0, "evicted": 0}

    # ------------------------------------------------------------------ per request
    def resolve(self, depart_at):
        """``(variant, weekday, slot)`` of a checked ``depart_at`` (:func:`parse_depart_at`); EngineError
        InvalidValue outside the calendar."""
        v, d, s, _ = self.profile.slot_of(depart_at)
        return v, d, s

    def winners(self, variant):
        """int64 (m,): the profile row that sets each arc's cost in ``variant`` (-1: none)."""
        prof = self.profile
        r = prof.rows
        rows = prof.variant_rows[variant]
        win = np.full(self._m, -1, np.int64)
        if rows.size == 0:
            return win
        prio = r["key_kind"][rows].astype(np.int64) * 3 + r["level"][rows]
        for p in np.unique(prio):  # least specific first: the more specific overwrite
            sel = rows[prio == p]
            kk = int(r["key_kind"][sel[0]])
            if kk == 0:  # road classes: a table by code
                table = np.full(int(self._class_code.max()) + 1 if self._class_code.size else 1, -1, np.int64)
                table[self._class_code[r["key"][sel]]] = sel
                hit = table[np.minimum(self._arc_class, table.size - 1)]
                hit[self._arc_class >= table.size] = -1
                hit[self._arc_class < 0] = -1
                win = np.where(hit >= 0, hit, win)
            elif kk == 1:  # ways: their arcs
                lo, hi = self._way_lo[sel], self._way_hi[sel]
                n = hi - lo
                idx = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
                win[self._way_order[idx]] = np.repeat(sel, n)
            else:
                win[r["key"][sel]] = sel
        return win

    def slot_metric(self, variant, base):
        """The metric of ``variant`` derived from overlay state ``base`` (see the module notes):
        ``(Metric, arc_duration int64 (m,) or None)``; ``(None, None)`` when the variant has no row.

        Raises
        ------
        EngineError
            ``InvalidValue``: the current metric takes no speeds (neither a time nor a Lua profile's
            weight), or a row's speed makes an arc's cost exceed the largest cost (naming its line).
        """
        from ..crp.metric import Metric
        from .traffic import DS, MAX_COST

        prof = self.profile
        if prof.variant_rows[variant].size == 0:
            return None, None
        tr = self.engine._traffic
        snap = tr.snapshot(base) if base is not tr.overlay._state else tr.snapshot()
        met = base.metric
        mult = tr._weight_multiplier(snap)
        if mult is None and not snap.is_time:
            raise EngineError("InvalidValue", f"depart_at needs a time metric (or the profile's weight); the current "
                                              f"metric {snap.name!r} does not depend on the time of day")
        live = np.asarray(base.arc_cost, dtype=np.int64)
        built = self._built(snap.name)
        changed = np.zeros(self._m, bool) if built is None else live != built
        g = self.engine.graph
        tt = np.asarray(g.weight("travel_time"), dtype=np.int64) if "travel_time" in g.weights else None
        dur = None if base.arc_duration is None else np.array(base.arc_duration, dtype=np.int64)
        if dur is not None and tt is not None:
            changed |= dur != tt
        win = self.winners(variant)
        win[changed] = -1
        sel = np.flatnonzero(win >= 0)
        r = prof.rows
        row = win[sel]
        speed = r["value_kind"][row] == VALUES.index("speed_kmh")
        val = r["value"][row]
        ref = live[sel].astype(np.float64) if built is None else built[sel].astype(np.float64)
        new_dur = None
        secs = np.zeros(sel.size)  # travel time (s) of the arcs a speed row sets (length_m checked at binding)
        if speed.any():
            secs[speed] = self._length[sel[speed]] / (val[speed] / 3.6)
        if mult is None:  # a time metric: the cost is the travel time (deciseconds, rounded as /customize's)
            cost = np.where(speed, _round_half_up(secs * 10.0) * (DS / snap.scale), val * ref)
        else:  # a Lua weight: OSRM's convertToWeight with rate = speed (m/s); durations follow the speed
            cost = np.where(speed, secs * mult, val * ref)
            base_dur = dur if dur is not None else (tt if tt is not None else None)
            if base_dur is not None:
                new_dur = base_dur.copy()
                d = np.where(speed, secs * 10.0, val * base_dur[sel])
                new_dur[sel] = np.maximum(1, _round_half_up(d)).astype(np.int64)
        cost = np.maximum(1.0, _round_half_up(cost))
        over = ~(cost <= MAX_COST)
        if over.any():
            i = int(np.flatnonzero(over)[0])
            raise EngineError("InvalidValue", f"time profile {prof._where(int(row[i]))}: makes arc {int(sel[i])} cost "
                                              f"{cost[i]:.3g}, over the largest cost {MAX_COST}")
        arc = live.copy()
        arc[sel] = cost.astype(np.int64)
        out = Metric(arc, met.turn_penalty, turn_cost=met.turn_cost, name=met.name, units=met.units)
        return out, new_dur

    def _built(self, name):
        """int64 (m,): the arc costs of metric ``name`` as built (what ``/customize`` changes are measured
        against), or None for a metric the router cannot name."""
        hit = self._pristine.get(name)
        if hit is None and name not in self._pristine:
            tr = self.engine._traffic
            from ..crp.metric import Metric

            hit = None
            if name in tr.metric_names():
                met = Metric.resolve(tr.graph, tr._resolve_metric(name), turns=tr.overlay.turns)
                hit = np.asarray(met.arc_cost, dtype=np.int64)
            self._pristine[name] = hit
        return hit

    def snapshot(self, variant, exclusion=None):
        """The :class:`gpuroute.engine.traffic.Snapshot` (with its state) of ``variant`` on the overlay's
        current metric, with ``exclusion``'s arcs closed where given; cached (see the module notes)."""
        tr = self.engine._traffic
        ov = tr.overlay
        if self.profile.variant_rows[variant].size == 0:  # no row: the current metric itself
            return tr.snapshot() if exclusion is None else exclusion.snapshot()
        key = (variant, None if exclusion is None else exclusion.key)
        hit = self._lookup(key, ov._need_state())
        if hit is not None:
            return hit
        with tr._lock:  # one customization at a time (the GPU's buffers); the overlay's state stays put
            base = ov._need_state()
            hit = self._lookup(key, base, count=False)
            if hit is not None:
                return hit
            met, dur = self.slot_metric(variant, base)
            same = dur is None and np.array_equal(np.asarray(met.arc_cost), np.asarray(base.arc_cost))
            if same and exclusion is not None:  # the rows change no cost (e.g. factor 1): the exclusion's own
                return exclusion.snapshot()
            if same:  # ... the current metric itself, no customization
                snap = tr.snapshot()
            else:
                if exclusion is not None:
                    from .exclude import excluded_metric

                    met = excluded_metric(met, ov.turns, exclusion.excluded)
                st = ov.customized_state(met)
                st.arc_duration = dur if dur is not None else base.arc_duration
                snap = tr.snapshot(st)
            with self._lock:
                self.stats["customizations"] += 0 if same else 1
                keep = max(0, int(config.SERVE_DEPART_CACHE))
                if keep:
                    self._cache[key] = (base, snap)
                    self._cache.move_to_end(key)
                    while len(self._cache) > keep:
                        self._cache.popitem(last=False)
                        self.stats["evicted"] += 1
        return snap

    def _lookup(self, key, base, count=True):
        with self._lock:
            stale = [k for k, (b, _) in self._cache.items() if b is not base]
            for k in stale:
                del self._cache[k]
            self.stats["evicted"] += len(stale)
            entry = self._cache.get(key)
            if entry is not None:
                self._cache.move_to_end(key)
            if count:
                self.stats["hits" if entry is not None else "misses"] += 1
            return None if entry is None else entry[1]

    def isochrone_metric(self, variant, word, met, exclusion=None):
        """The isochrone :class:`gpuroute.engine.services.isochrone.search.Metric` of ``variant`` for
        ``word`` (``"duration"``; ``"distance"`` does not depend on the time: ``met`` itself), from the slot's
        arc costs (no customization: the isochrone searches the turn graph), ``exclusion``'s turns closed."""
        e = self.engine
        if word != "duration" or self.profile.variant_rows[variant].size == 0:
            return met if exclusion is None else exclusion.isochrone_metric(met)
        tr = e._traffic
        base = tr.overlay._need_state()
        key = (variant, None if exclusion is None else exclusion.key)
        with self._lock:
            hit = self._iso.get(key)
            if hit is not None and hit[0] is base:
                self._iso.move_to_end(key)
                return hit[1]
        from ..crp.metric import decode_turn_costs
        from .services.isochrone import search

        slot, dur = self.slot_metric(variant, base)
        snap0 = tr.snapshot()
        om = getattr(e, "_iso_overlay", None)
        if om is None:
            om = e._iso_overlay = search.OverlayMetrics(e.graph, tr)
        if snap0.is_time:
            w = np.asarray(slot.arc_cost, dtype=np.float64)
            tcost = np.asarray(decode_turn_costs(slot, tr.overlay.turns), dtype=np.float64)
            out = search.Metric(slot.name, w, float(snap0.scale), turns=(om.first, om.out_arc, tcost))
        else:  # the slot's travel times with the graph's turn durations, the live closures closed
            out = om._closing(om._graph_metric("time", dur), base.metric)
        if exclusion is not None:
            out = exclusion.isochrone_metric(out)
        with self._lock:
            self._iso[key] = (base, out)
            while len(self._iso) > max(1, int(config.SERVE_DEPART_CACHE)):
                self._iso.popitem(last=False)
        return out

    def info(self):
        """Plain data: the profile's :meth:`TimeProfile.info`, ``cached`` (slot metrics kept), ``cache_size``
        (``config.SERVE_DEPART_CACHE``), ``bytes_per_metric`` (one customization's arrays: cliques, trees,
        turn and arc costs, as the overlay's current state holds them) and ``stats``."""
        st = self.engine._traffic.overlay._need_state()
        nbytes = sum(int(getattr(getattr(st, k, None), "nbytes", 0) or 0)
                     for k in ("arc_cost", "turn_cost", "clique", "tree", "q_arc_cost", "q_turn_cost"))
        nbytes += 8 * self._m  # the snapshot's float64 arc costs
        with self._lock:
            cached, stats = len(self._cache), dict(self.stats)
        return {**self.profile.info(), "cached": cached, "cache_size": int(config.SERVE_DEPART_CACHE),
                "bytes_per_metric": nbytes, "stats": stats}


def _round_half_up(x):
    """OSRM's ``std::round`` of values >= 0 (half away from zero), float64."""
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


# ------------------------------------------------------------------------------------------ requests
class Departure:
    """A request's departure slot, in the shape the services take an exclusion (:class:`gpuroute.engine.
    exclude.Exclusion`): :meth:`snapshot` (the slot's metric, with the request's exclusion), ``excluded``,
    ``key`` and :meth:`segments` (snapping: the exclusion's), :meth:`isochrone_metric`.

    Attributes
    ----------
    slots : TimeSlots
    variant, weekday, slot : int
    when : datetime.datetime
        The ``depart_at`` given.
    inner : Exclusion or None
    """

    def __init__(self, slots, variant, weekday, slot, when, inner=None, word=None):
        self.slots = slots
        self.variant = variant
        self.weekday = weekday
        self.slot = slot
        self.when = when
        self.inner = inner
        self._word = word
        self.excluded = None if inner is None else inner.excluded
        self.key = None if inner is None else inner.key
        self.names = () if inner is None else inner.names

    @property
    def avoids(self):
        return False if self.inner is None else self.inner.avoids

    def snapshot(self):
        """The slot's :class:`gpuroute.engine.traffic.Snapshot` (see :meth:`TimeSlots.snapshot`)."""
        return self.slots.snapshot(self.variant, self.inner)

    def segments(self, component=None):
        """The exclusion's segment index, None without one (the engine's own)."""
        return None if self.inner is None else self.inner.segments(component)

    def isochrone_metric(self, met):
        return self.slots.isochrone_metric(self.variant, self._word, met, self.inner)

    def __repr__(self):
        return (f"Departure({self.when.isoformat()}, {_WEEKDAY_NAMES[self.weekday]} slot {self.slot}, "
                f"variant {self.variant}, exclusion={self.inner!r})")


def departure(engine, p, ex):
    """The exclusion a request runs with: ``ex`` (an :class:`gpuroute.engine.exclude.Exclusion` or None)
    itself without ``depart_at`` or where no profile row covers the departure's slot (the request is then
    answered exactly as without ``depart_at``: the current metric), else a :class:`Departure` wrapping it.

    Raises
    ------
    EngineError
        ``InvalidValue``: ``depart_at`` without a time profile loaded, or outside its calendar.
    """
    when = getattr(p, "depart_at", None)
    if when is None:
        return ex
    slots = engine._time_slots
    if slots is None:
        raise EngineError("InvalidValue", f"depart_at {when.isoformat()}: no time profile is loaded (Engine.open(..., "
                                          "time_profile=FILE), engine.set_time_profile(FILE) or gpuroute serve DIR "
                                          "--time-profile FILE)")
    v, d, s = slots.resolve(when)
    if slots.profile.variant_rows[v].size == 0:  # no row in this slot: the request as without depart_at
        return ex
    return Departure(slots, v, d, s, when, ex, getattr(p, "metric", None))


def load(engine, profile):
    """A :class:`TimeSlots` of ``engine`` from a path or a :class:`TimeProfile` (None: None)."""
    if profile is None:
        return None
    if not isinstance(profile, TimeProfile):
        profile = TimeProfile.read(os.fspath(profile))
    return TimeSlots(engine, profile)


# ------------------------------------------------------------------------------------------ in a dataset
#: The time profile a dataset directory carries (:func:`store_profile`, ``gpuroute timeprofile DIR FILE``):
#: :meth:`gpuroute.engine.Engine.open` of the directory, hence ``gpuroute serve DIR``, loads it; an explicit
#: ``time_profile=`` / ``--time-profile FILE`` overrides it.
STORED = "time_profile.csv"


def stored_profile(directory):
    """The path of the time profile stored in dataset directory ``directory`` (``DIR/time_profile.csv``), or
    None where it has none."""
    path = os.path.join(os.fspath(directory), STORED)
    return path if os.path.isfile(path) else None


def stored_profile_of(spec):
    """:func:`stored_profile` of ``spec`` where it is a dataset directory (what :meth:`gpuroute.engine.Engine.open`
    loads without ``time_profile=``), else None."""
    from .dataset import is_dataset

    try:
        d = os.fspath(spec)
    except TypeError:  # a RoadGraph
        return None
    return stored_profile(d) if is_dataset(d) else None


def check_profile(engine, profile):
    """Validate ``profile`` fully against ``engine`` (an engine with an overlay): every key in the graph
    (:class:`TimeSlots`) and every variant's slot metric made from the overlay's current metric (a speed row
    on a metric that takes none, a cost over the largest cost). Returns the :class:`TimeSlots`.

    Raises
    ------
    TimeProfileError
        Naming the file, the line and the field (an :class:`~gpuroute.engine.osrm.EngineError` of the slot
        metric is raised as one).
    EngineError
        ``NotImplemented``: an engine without an overlay.
    """
    slots = TimeSlots(engine, profile)
    base = engine._traffic.overlay._need_state()
    for v in range(len(profile.variant_rows)):
        try:
            slots.slot_metric(v, base)
        except EngineError as e:
            raise TimeProfileError(f"{profile.path}: {e.message}") from None
    return slots


def profile_bytes(source, engine):
    """A profile file checked fully against ``engine`` (:func:`check_profile`) and the bytes to store for it: a
    CSV's own bytes (its lines keep their numbers in later messages), a Parquet file's equivalent CSV
    (:meth:`TimeProfile.to_csv`, checked to read back to the same rows). Returns ``(TimeProfile, bytes)``.

    Raises
    ------
    FileNotFoundError
    TimeProfileError
        A bad profile, naming the file, the line and the field; a file that changed while it was read.
    """
    src = Path(os.fspath(source))
    if not src.is_file():
        raise FileNotFoundError(f"time profile {str(source)!r}: no such file")
    data = src.read_bytes()
    prof = TimeProfile.read(src)
    check_profile(engine, prof)
    if src.suffix.lower() not in (".parquet", ".pq"):  # a CSV: the bytes that were checked
        if src.read_bytes() != data:
            raise TimeProfileError(f"{src}: changed while it was read")
        return prof, data
    import tempfile

    text = prof.to_csv().encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        back = Path(tmp) / STORED
        back.write_bytes(text)
        if not prof.same_rows(TimeProfile.read(back)):  # pragma: no cover - to_csv writes what _build reads
            raise TimeProfileError(f"{src}: does not convert to CSV exactly")
    return prof, text


def store_profile(directory, source, *, engine=None):
    """Store a time profile in a dataset directory (``DIR/time_profile.csv``, :data:`STORED`), replacing the
    one stored before; :meth:`gpuroute.engine.Engine.open` of the directory loads it from then on
    (``gpuroute build ... --time-profile FILE`` stores one as the directory is built).

    The profile is validated fully before anything is written: read (every line), bound to the dataset's
    graph and every slot's metric made (:func:`check_profile`). A CSV is stored byte for byte (its lines keep
    their numbers in later messages); a Parquet file as the equivalent CSV (metadata lines, then one row per
    input row, ``day,start,end,<keys>,<values>``; checked to read back to the same rows;
    :func:`profile_bytes`). The write is atomic (:func:`gpuroute.store.atomic_file`): on any error the
    directory is left as it was.

    Parameters
    ----------
    directory : str or path-like
        A dataset directory (``gpuroute build GRAPH -o DIR``).
    source : str or path-like
        The profile file (``.csv``; ``.parquet`` with pandas and pyarrow; the format in the module notes).
    engine : gpuroute.engine.Engine, optional
        An engine opened from ``directory`` to validate against (default: the directory opened without its
        stored profile).

    Returns
    -------
    dict
        The stored profile's :meth:`TimeProfile.info` (``file``: the stored path).

    Raises
    ------
    FileNotFoundError
        No such profile file or directory.
    gpuroute.engine.dataset.DatasetError
        ``directory`` is not a dataset directory.
    TimeProfileError
        A bad profile (naming the file, the line and the field); nothing is written.
    """
    from .. import store
    from .dataset import read_manifest

    directory = os.path.abspath(os.fspath(directory))
    read_manifest(directory)  # a dataset directory, before reading anything else
    if not Path(os.fspath(source)).is_file():
        raise FileNotFoundError(f"time profile {str(source)!r}: no such file")
    if engine is None:
        from .engine import Engine

        engine = Engine._open(directory)  # not the stored profile: it is being replaced (and may be bad)
    prof, text = profile_bytes(source, engine)
    target = os.path.join(directory, STORED)
    with store.atomic_file(target, "wb") as f:
        f.write(text)
    return {**prof.info(), "file": target}


def remove_stored_profile(directory):
    """Delete the time profile stored in dataset directory ``directory``; True if there was one."""
    path = os.path.join(os.fspath(directory), STORED)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
