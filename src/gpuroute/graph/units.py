"""Units of weights: a quantity (length, time, count) and a scale to SI, instead of free strings.

A weight array holds positive integers; its :class:`Unit` says what one integer step is worth: a
``length`` in metres or a ``time`` in seconds (``scale``), exactly or approximately. ``describe``
gives the human reading users expect (``"12.35 km"``, ``"1 h 04 min"``), so a travel time is reported
as a duration and a length as a distance whatever its integer unit.

The DIMACS 9 USA road graphs state no unit. ``dimacs-d`` is commonly read as about 0.1 m (TIGER/Line
distances). ``dimacs-t`` is a travel time; on the NY pair of files ``d / t`` takes four values on
99.9 % of the arcs, 0.4, 0.6, 0.8 and 1.0 (road classes), which reads as 40/60/80/100 km/h at one
``dimacs-t`` step = 0.0036 s when one ``dimacs-d`` step is 0.1 m. Both are marked approximate.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import asdict, dataclass

QUANTITIES = ("length", "time", "count", "other")


@dataclass(frozen=True)
class Unit:
    """The unit of one weight or arc attribute.

    Attributes
    ----------
    symbol : str
        Short name shown next to numbers (``"m"``, ``"ds"``, ``"dimacs-d"``, ``"mi/1000"``).
    quantity : {"length", "time", "count", "other"}
        What the numbers measure.
    scale : float or None
        SI base units (metres for length, seconds for time) per one step of the integer; None when
        unknown (e.g. METIS ``.xyz`` lengths).
    approximate : bool
        True when ``scale`` is an estimate (the DIMACS 9 units), so readings are shown with ``~``.
    note : str
        Provenance of the scale, shown by ``gpuroute info``.
    """

    symbol: str
    quantity: str = "other"
    scale: float | None = None
    approximate: bool = False
    note: str = ""

    def __post_init__(self):
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unit quantity must be one of {QUANTITIES}, got {self.quantity!r}")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"unit scale must be a positive finite number or None, got {self.scale!r}")

    # ------------------------------------------------------------------ conversions
    def to_si(self, value):
        """``value`` (a number or array in this unit) in metres or seconds; ValueError if unknown."""
        if self.scale is None:
            raise ValueError(f"unit {self.symbol!r} has no known scale to SI")
        return value * self.scale

    @property
    def is_duration(self) -> bool:
        return self.quantity == "time"

    @property
    def is_distance(self) -> bool:
        return self.quantity == "length"

    def describe(self, value) -> str:
        """Human reading of ``value`` in this unit: ``"12.35 km"``, ``"850 m"``, ``"1 h 04 min"``,
        ``"4 min 10 s"``, ``"~12.35 km"`` for an approximate unit; ``""`` when the scale is unknown."""
        if self.scale is None or self.quantity not in ("length", "time"):
            return ""
        si = float(value) * self.scale
        tilde = "~" if self.approximate else ""
        if self.quantity == "length":
            return f"{tilde}{si / 1e3:,.2f} km" if si >= 1000 else f"{tilde}{si:,.0f} m"
        return tilde + format_duration(si)

    def format(self, value) -> str:
        """``"1,918 ds (3 min 12 s)"``: the integer with its symbol and, where known, its reading."""
        v = float(value)
        s = f"{int(v):,}" if v == int(v) else f"{v:,.1f}"
        s = f"{s} {self.symbol}".rstrip()
        reading = self.describe(value)
        return f"{s} ({reading})" if reading else s

    # ------------------------------------------------------------------ (de)serialisation
    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d) -> Unit:
        if isinstance(d, str):
            return parse_unit(d)
        if not isinstance(d, dict) or "symbol" not in d:
            raise ValueError(f"a unit must be a dict with a 'symbol' (or a unit string), got {d!r}")
        return cls(symbol=str(d["symbol"]), quantity=d.get("quantity", "other"), scale=d.get("scale"),
                   approximate=bool(d.get("approximate", False)), note=str(d.get("note", "")))

    def __str__(self):
        return self.symbol


def format_duration(seconds: float) -> str:
    """``"12.5 s"``, ``"4 min 10 s"``, ``"1 h 04 min"`` for a duration in seconds."""
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


METRE = Unit("m", "length", 1.0)
DECIMETRE = Unit("dm", "length", 0.1)
CENTIMETRE = Unit("cm", "length", 0.01)
KILOMETRE = Unit("km", "length", 1000.0)
SECOND = Unit("s", "time", 1.0)
DECISECOND = Unit("ds", "time", 0.1)
MILLISECOND = Unit("ms", "time", 0.001)
MINUTE = Unit("min", "time", 60.0)
HOUR = Unit("h", "time", 3600.0)
HOP = Unit("edges", "count", 1.0)
NONE = Unit("", "other", None)
#: DIMACS 9 ``USA-road-d`` distances: about 0.1 m per step (TIGER/Line; the challenge states no unit).
DIMACS_DISTANCE = Unit("dimacs-d", "length", 0.1, approximate=True,
                       note="DIMACS 9 USA-road-d distance; the challenge states no unit, ~0.1 m per step")
#: DIMACS 9 ``USA-road-t`` travel times. The challenge states no unit; on NY ``d / t`` is 0.4, 0.6, 0.8
#: or 1.0 on 99.9 % of the arcs, i.e. 40/60/80/100 km/h road classes at 0.0036 s per step (with
#: ``dimacs-d`` = 0.1 m): an estimate, shown with ``~``.
DIMACS_TIME = Unit("dimacs-t", "time", 0.0036, approximate=True,
                   note="DIMACS 9 USA-road-t travel time; the challenge states no unit: ~0.0036 s per step "
                        "(NY's d/t ratios 0.4/0.6/0.8/1.0 read as 40-100 km/h road classes at 0.1 m per d step)")

#: Units by symbol (and a few spellings the loaders used to write as free strings).
KNOWN = {u.symbol: u for u in (METRE, DECIMETRE, CENTIMETRE, KILOMETRE, SECOND, DECISECOND, MILLISECOND,
                               MINUTE, HOP, DIMACS_DISTANCE, DIMACS_TIME)}
KNOWN.update({"metre": METRE, "meter": METRE, "metres": METRE, "meters": METRE, "0.1m": DECIMETRE,
              "0.1 m": DECIMETRE, "sec": SECOND, "seconds": SECOND, "deciseconds": DECISECOND,
              "dimacs-d (~0.1 m)": DIMACS_DISTANCE, "hops": HOP})

#: The units a user may give a quantity in (``"2 km"``, ``radius=2000, unit="m"``), by symbol; ``"native"``
#: (the weight's own unit) is accepted beside them by :func:`to_weight_units`.
QUANTITY_UNITS = {u.symbol: u for u in (METRE, KILOMETRE, SECOND, MINUTE, HOUR)}

#: Units of the standard weight names.
STANDARD_UNITS = {"distance": METRE, "travel_time": DECISECOND}


def parse_unit(spec) -> Unit:
    """A :class:`Unit` from a Unit, a dict (``to_json``), a known symbol, or any other string (kept as
    an ``"other"`` unit with unknown scale). None or ``""`` gives the empty unit."""
    if isinstance(spec, Unit):
        return spec
    if spec is None:
        return NONE
    if isinstance(spec, dict):
        return Unit.from_json(spec)
    if not isinstance(spec, str):
        raise TypeError(f"a unit must be a Unit, a dict or a string, got {type(spec).__name__}")
    s = spec.strip()
    if s in KNOWN:
        return KNOWN[s]
    low = s.lower()
    if low in KNOWN:
        return KNOWN[low]
    return Unit(s, "other", None)


def scaled(base: Unit, factor: float, symbol: str | None = None) -> Unit:
    """``base`` divided into ``factor`` steps: e.g. ``scaled(MILE, 1000)`` is a thousandth of a mile,
    the unit of integers made from fractional miles times 1000."""
    if base.scale is None:
        return Unit(symbol or f"{base.symbol}/{factor:g}", base.quantity, None, base.approximate, base.note)
    return Unit(symbol or f"{base.symbol}/{factor:g}", base.quantity, base.scale / factor, base.approximate,
                base.note)


MILE = Unit("mi", "length", 1609.344)
FOOT = Unit("ft", "length", 0.3048)
HOUR = Unit("h", "time", 3600.0)
KNOWN.update({"mi": MILE, "mile": MILE, "miles": MILE, "ft": FOOT, "feet": FOOT, "h": HOUR, "hour": HOUR,
              "hours": HOUR, "minutes": MINUTE, "minute": MINUTE, "km": KILOMETRE})


_QUANTITY = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*((?:[A-Za-z][\w/.-]*)?)\s*", re.ASCII)


def split_quantity(text, weight_unit: Unit | None = None, what="value"):
    """``(number, symbol)`` of ``"2 km"``, ``"2000m"``, ``"10 min"`` (``symbol`` may be ``""``).

    Raises
    ------
    ValueError
        Not a number >= 0 optionally followed by a unit symbol (ASCII only).
    """
    m = _QUANTITY.fullmatch(text)
    if not m:
        own = f", or {weight_unit.symbol!r}" if weight_unit is not None and weight_unit.symbol else ""
        raise ValueError(f"{what}={text!r}: expected a number >= 0 with a unit, e.g. '2 km', '2000 m', "
                         f"'10 min' (units: {', '.join(QUANTITY_UNITS)}{own})")
    return float(m.group(1)), m.group(2)


def factor_to(weight_unit: Unit, target: str, what: str = "value") -> float:
    """Multiplier from numbers in ``weight_unit`` to numbers in ``target`` (a :data:`QUANTITY_UNITS` symbol
    or ``"native"``).

    Raises
    ------
    ValueError
        ``target`` is unknown, or of another quantity than the weight, or the weight's scale is unknown.
    """
    if target == "native":
        return 1.0
    if target not in QUANTITY_UNITS:
        raise ValueError(f"{what}: unit must be 'native' or one of {list(QUANTITY_UNITS)}, got {target!r}")
    t = QUANTITY_UNITS[target]
    if weight_unit.quantity != t.quantity or weight_unit.scale is None:
        known = "" if weight_unit.scale is not None else " of unknown scale"
        raise ValueError(f"{what}: unit {target!r} needs a {t.quantity} weight of known scale; the weight is "
                         f"{weight_unit.quantity}{known} [{weight_unit.symbol or 'no unit'}], not a {t.quantity}: "
                         "give it in the weight's own unit (unit='native')")
    return float(weight_unit.scale) / t.scale


def unambiguous(weight_unit: Unit) -> bool:
    """Whether a bare number can only mean ``weight_unit``: the weight is in metres or seconds, or has no
    known length/time scale (its own unit is then the only reading)."""
    return weight_unit.quantity not in ("length", "time") or weight_unit.scale is None or weight_unit.scale == 1.0


def to_weight_units(value, weight_unit: Unit, *, unit=None, what="value") -> float:
    """``value`` in the weight's unit: the one place a user's quantity (a radius, a cut-off) is read.

    Parameters
    ----------
    value : float or str
        A number >= 0, or a string with its unit: ``"2 km"``, ``"2000m"``, ``"600 s"``, ``"10 min"``,
        ``"1.5h"`` (:data:`QUANTITY_UNITS`), or the weight's own symbol (``"20000 dimacs-d"``).
    weight_unit : Unit
        The unit of the weight the value is compared with (``graph.units[weight]``).
    unit : str, optional
        The unit of a numeric ``value``: a :data:`QUANTITY_UNITS` symbol or ``"native"`` (the weight's
        unit). Default None: a bare number is taken in the weight's unit only where that is unambiguous
        (:func:`unambiguous`: metres, seconds, or a unit of unknown scale); pandana users pass metres, so a
        bare number on, e.g., the DIMACS ``~0.1 m`` distances or deciseconds is refused.
    what : str
        The parameter's name, for messages.

    Returns
    -------
    float
        ``>= 0``, in ``weight_unit``.

    Raises
    ------
    ValueError
        Not a finite number >= 0; an unknown unit or one of the other quantity; a bare number where it is
        ambiguous (the message shows the ways to say it); both a string unit and ``unit``.
    TypeError
        Neither a number nor a string.
    """
    if isinstance(value, str):
        number, symbol = split_quantity(value, weight_unit, what)
        if symbol and unit is not None:
            raise ValueError(f"{what}={value!r} names its unit; unit={unit!r} must then be left out")
        if not symbol:
            unit_used = unit
        elif symbol == weight_unit.symbol and symbol:
            unit_used = "native"
        elif symbol in QUANTITY_UNITS:
            unit_used = symbol
        else:
            raise ValueError(f"{what}={value!r}: unknown unit {symbol!r} (units: {', '.join(QUANTITY_UNITS)}"
                             + (f", or the weight's {weight_unit.symbol!r})" if weight_unit.symbol else ")"))
        value = number
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number or a string with a unit ('2 km'), got {value!r}")
    else:
        unit_used = unit
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    if unit_used is None:
        if not unambiguous(weight_unit):
            si = "m" if weight_unit.quantity == "length" else "s"
            raise ValueError(f"{what}={value!r} is a bare number, but the weight's unit is {weight_unit.symbol} "
                             f"({weight_unit.scale:g} {si} per step): say which you mean, {what}='{v:g} {si}' "
                             f"(or unit='{si}'), or unit='native' for {weight_unit.symbol} steps")
        return v
    return v / factor_to(weight_unit, unit_used, what)
