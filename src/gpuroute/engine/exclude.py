"""OSRM's ``exclude=``: routes, tables, trips, isochrones and nearest that avoid some classes of road
(``toll``, ``motorway``, ``ferry``, ...), answered as ``osrm-routed`` answers them.

What OSRM does (osrm-backend ``docs/http.md``, ``datafacade_factory.hpp``, ``geospatial_query.hpp``)
-------------------------------------------------------------------------------------------------
A Lua profile names its ``classes`` and the combinations a request may exclude (``excludable``; car.lua:
``{toll}``, ``{motorway}``, ``{ferry}``). Each way direction carries the classes the profile set on it.
A request's ``exclude=a,b`` is the union of the named classes' bits; it is served only when that union is
one of the declared combinations (the order and repeats of the names do not matter), else ``InvalidValue``
"Exclude flag combination is not supported." (an unknown name too); an algorithm without exclude support
answers ``NotImplemented`` "This algorithm does not support exclude flags.". With a served combination an
arc (a direction of a segment) is *excluded* when it has any of the combination's classes: no route
enters it, and snapping skips it (``CheckSegmentExclude``: a segment whose two directions are excluded is
not a candidate; one of whose directions is, snaps with the other direction only).

How gpuroute answers it
-----------------------
* **Classes** come from the graph: the arc attribute ``classes`` (bit ``i`` = ``meta["classes"][i]``) and
  ``meta["excludable"]`` (:func:`gpuroute.io.lua_extract.extract`, the profile's own sets). A graph
  without them (the native ``car-basic`` profile, DIMACS, ...) declares no combination: every exclude is
  ``InvalidValue``, as osrm-routed on a dataset whose profile has no ``excludable``.
* **Searches** run over the customized overlay (engines of a dataset directory). Per combination, the
  overlay's current metric is customized again with every turn INTO an excluded arc forbidden (a per-turn
  override :data:`gpuroute.crp.metric.FORBIDDEN`; the other turns keep their costs and restricted turns
  stay forbidden): the customization treats forbidden turns exactly as turn restrictions, so the cliques
  are exact shortest paths of the graph without the excluded arcs (a large finite cost instead would leak
  into cliques as a finite detour and into the search's label range). That customization goes into a
  separate state (:meth:`gpuroute.crp.Overlay.customized_state`): the overlay's own metric, its traffic
  updates and every request without exclude are untouched. Routes (:meth:`gpuroute.engine.traffic.
  TrafficRouter.plan` with the state's snapshot), tables and trips (:meth:`gpuroute.engine.algorithms.
  CRP.many_to_many` on it) read only that state; the arc costs are the current metric's, so reported
  weights and durations are those of the same route without exclude.
* **Isochrones** search the turn graph directly (a bounded Dijkstra, no cliques): the current isochrone
  metric with the same turns forbidden (:meth:`Exclusion.isochrone_metric`), no customization needed.
* **Avoids** (``avoid_polygons``, ``avoid_ways``: :mod:`gpuroute.engine.avoid`) are another source of
  excluded arcs, OR-ed with the combination's (or alone: class mask 0); such an :class:`Exclusion` is keyed
  by a hash of its arcs and kept in a cache of its own (``config.SERVE_AVOID_CACHE``), the rest as below.
* **Snapping**: a :class:`gpuroute.geo.segments.SegmentIndex` with ``arc_mask`` = not excluded (its own
  k-d tree; built once per combination and component, kept for the engine's life: it does not depend on
  the metric). The component is the graph's (OSRM's components come from extraction too).

Cost per request and cache policy
---------------------------------
A request without ``exclude`` pays nothing. A request with one pays the class lookup (a few dict reads),
and, for a combination not cached for the current metric, ONE whole customization of the overlay on the
device ``/customize`` uses (GPU where usable) plus, the first time a combination is used, its segment
index. Monaco (``benchmarks/exclude.py``): the customization takes 1.5-2 ms on a 2-core CPU with both
cores free (up to ~35 ms while another process holds one: numba's parallel levels wait), 0.3 ms on 16
cores, 0.7 ms on an H200; the segment index ~15 ms; a route that hits the cache costs what one without
exclude costs (0.40 vs 0.38 ms on the H200 machine's CPU).
Customized states are kept per combination in a least-recently-used cache of
``config.SERVE_EXCLUDE_CACHE`` entries (0: none kept, every request customizes), each valid for ONE
customization of the overlay: the entry remembers the overlay state it was derived from and is stale as
soon as ``/customize`` installs another (traffic updates, a new metric; the server's warm-up too), so a
route with exclude follows traffic exactly as one without. Stale entries are dropped at the next lookup.
Memory per entry: one more customization of the overlay (cliques, trees, decoded turn costs). A miss
takes the traffic router's lock (one customization at a time, on either device), so concurrent requests
for one combination customize it once and a ``/customize`` waits for a build in progress.
:attr:`Excluder.stats` counts ``customizations``, ``hits`` and ``misses``.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import config
from ..crp.metric import FORBIDDEN, N_TURN_TYPES, Metric
from .osrm import EngineError

__all__ = ["Excluder", "Exclusion", "excluder", "resolve", "excluded_metric", "UNSUPPORTED", "NO_EXCLUDE"]

#: osrm-routed's message for an exclude whose classes are unknown or whose union is not declared
#: (code ``InvalidValue``).
UNSUPPORTED = "Exclude flag combination is not supported."
#: osrm-routed's message for an algorithm without exclude support (code ``NotImplemented``).
NO_EXCLUDE = "This algorithm does not support exclude flags."

_CREATE = threading.Lock()


def excluder(engine):
    """The :class:`Excluder` of ``engine`` (made on first use, one per engine)."""
    ex = engine._excluder
    if ex is None:
        with _CREATE:
            ex = engine._excluder
            if ex is None:
                ex = engine._excluder = Excluder(engine)
    return ex


def resolve(engine, exclude, avoid_polygons=None, avoid_ways=None):
    """The :class:`Exclusion` an ``exclude`` argument (and the per-request ``avoid_polygons`` /
    ``avoid_ways``, :mod:`gpuroute.engine.avoid`: their arcs are excluded too) asks of ``engine``, or None
    for no exclusion (each None, ``""`` or empty; an avoid that covers no arc). See
    :meth:`Excluder.resolve` and :func:`gpuroute.engine.avoid.avoid_mask` for the errors."""
    none = exclude is None or (isinstance(exclude, (str, list, tuple)) and len(exclude) == 0)
    avoid = None
    if avoid_polygons is not None or avoid_ways is not None:
        from .avoid import avoid_mask

        avoid = avoid_mask(engine, avoid_polygons, avoid_ways)
        if avoid is not None and not avoid.any():
            avoid = None
    if none and avoid is None:
        return None
    return excluder(engine).resolve(None if none else exclude, avoid=avoid)


def excluded_metric(metric, turns, excluded):
    """``metric`` with every turn into an excluded arc closed: the same arc costs, penalties, name and units,
    and a per-turn override (``turns.n_turns``,) that keeps each turn's penalty (the metric's own override,
    else its type penalty) and is :data:`gpuroute.crp.metric.FORBIDDEN` where ``excluded[out_arc]``.

    Parameters
    ----------
    metric : gpuroute.crp.Metric
    turns : gpuroute.crp.metric.TurnTable
        The overlay's.
    excluded : ndarray bool (m,)

    Returns
    -------
    gpuroute.crp.Metric
        Its decoded turn costs equal ``metric``'s except ``FORBIDDEN`` on the turns into excluded arcs.
    """
    if metric.turn_cost is not None:
        part = np.asarray(metric.turn_cost, dtype=np.int64)
    else:  # the type penalty of each turn (a restricted turn stays forbidden whatever it holds)
        part = np.asarray(metric.turn_penalty, dtype=np.int64)[np.minimum(np.asarray(turns.kind, np.int64),
                                                                          N_TURN_TYPES - 1)]
    part = np.where(excluded[np.asarray(turns.out_arc, dtype=np.int64)], FORBIDDEN, part)
    return Metric(metric.arc_cost, metric.turn_penalty, turn_cost=part, name=metric.name, units=metric.units)


class Exclusion:
    """One served exclude combination of one engine.

    Attributes
    ----------
    names : tuple of str
        The classes excluded (the declared set, sorted).
    mask : int
        Their bits in the arc attribute ``classes``.
    excluded : ndarray bool (m,)
        The arcs no route enters and no waypoint snaps to (with an avoid: the classes' arcs and the avoided).
    key : int or tuple
        What its cached parts are kept under: ``mask`` for a combination; ``("avoid", mask, digest)`` with
        an avoid (a hash of ``excluded``).
    """

    def __init__(self, owner, mask, names, excluded, key=None):
        self._owner = owner
        self.mask = int(mask)
        self.names = tuple(names)
        self.excluded = excluded
        self.key = self.mask if key is None else key

    @property
    def avoids(self):
        """Whether it comes with a per-request avoid (its parts go to the avoid cache)."""
        return not isinstance(self.key, int)

    def segments(self, component=None):
        """The segment index of the arcs not excluded (``component`` as :class:`gpuroute.geo.segments.
        SegmentIndex`'s; None: that of the engine's own index), built once per combination and component."""
        if component is None:
            component = self._owner.engine.segments.component
        return self._owner._segments(self, component)

    def snapshot(self):
        """The :class:`gpuroute.engine.traffic.Snapshot` of the current metric with the excluded arcs
        closed, its ``state`` a customization of its own (cached; see the module doc)."""
        return self._owner._snapshot(self)

    def isochrone_metric(self, met):
        """An isochrone :class:`gpuroute.engine.services.isochrone.search.Metric` with turns (an overlay engine's) with every
        turn into an excluded arc forbidden (cached per metric object)."""
        return self._owner._isochrone_metric(self, met)

    def __repr__(self):
        return f"Exclusion({','.join(self.names)!r}, arcs={int(self.excluded.sum())})"


class Excluder:
    """The exclude combinations of one engine and the customizations that serve them (thread-safe).

    Parameters
    ----------
    engine : gpuroute.engine.Engine

    Attributes
    ----------
    classes : list of str
        The graph's classes (``meta["classes"]``: bit ``i`` of the arc attribute ``classes``).
    excludable : list of tuple of str
        The declared combinations (``meta["excludable"]``), in the profile's order.
    supported : bool
        Whether the engine can exclude (it has an overlay).
    stats : dict
        ``customizations`` (states built), ``hits`` and ``misses`` (snapshot lookups), ``evicted`` (stale or
        least recently used entries dropped).
    """

    def __init__(self, engine):
        g = engine.graph
        self.engine = engine
        self.classes = [str(c) for c in (g.meta.get("classes") or [])]
        bit = {c: 1 << i for i, c in enumerate(self.classes)}
        self.excludable = []
        self._masks = {}
        for s in g.meta.get("excludable") or []:
            names = tuple(sorted({str(x) for x in s}))
            if names and all(n in bit for n in names):
                mask = 0
                for n in names:
                    mask |= bit[n]
                self._masks.setdefault(mask, names)
                self.excludable.append(names)
        self._bit = bit
        cls = g.arc_attrs.get("classes")
        self._arc_classes = None if cls is None else np.asarray(cls, dtype=np.int64)
        self.supported = getattr(engine, "_traffic", None) is not None
        self._lock = threading.Lock()
        self._cache = OrderedDict()  # mask -> (base overlay state, Snapshot)
        self._avoid_cache = OrderedDict()  # Exclusion.key -> (base overlay state, Snapshot), avoids only
        self._seg = {}
        self._avoid_seg = OrderedDict()  # (Exclusion.key, component) -> SegmentIndex, avoids only
        self._iso = OrderedDict()
        self._excl = {}
        self.stats = {"customizations": 0, "hits": 0, "misses": 0, "evicted": 0}

    # ------------------------------------------------------------------ requests
    def resolve(self, exclude, avoid=None):
        """The :class:`Exclusion` of an ``exclude`` argument.

        Parameters
        ----------
        exclude : str or sequence of str, or None
            Class names (``"toll,motorway"`` or ``["toll", "motorway"]``); None: no class (with ``avoid``).
        avoid : ndarray bool (m,), optional
            More arcs to exclude (:func:`gpuroute.engine.avoid.avoid_mask`).

        Returns
        -------
        Exclusion

        Raises
        ------
        EngineError
            ``NotImplemented`` (a declared combination, but no overlay: the hierarchy answers routes for
            the one metric it was built for), ``InvalidValue`` (:data:`UNSUPPORTED`: a name that is no class of the graph, or classes
            whose union is not one of :attr:`excludable`; also a value that is not class names).
        """
        if exclude is None:
            if avoid is None:
                raise ValueError("resolve needs an exclude or an avoid")
            if not self.supported:
                raise EngineError("NotImplemented", "avoid_polygons/avoid_ways need a customized overlay: build a "
                                                    "dataset with `gpuroute build GRAPH -o DIR` and serve DIR")
            return self._avoiding(0, (), avoid)
        names = exclude.split(",") if isinstance(exclude, str) else exclude
        try:
            names = list(names)
        except TypeError:
            names = [exclude]
        if not names or not all(isinstance(n, str) and n for n in names):
            raise EngineError("InvalidValue", f"{UNSUPPORTED} (exclude must be class names, got {exclude!r})")
        unknown = [n for n in names if n not in self._bit]
        mask = 0
        for n in names:
            mask |= self._bit.get(n, 0)
        if unknown or mask not in self._masks or self._arc_classes is None:
            why = (f"unknown class {unknown[0]!r}" if unknown else
                   f"{','.join(sorted(set(names)))} is not a combination the profile declares")
            decl = "; ".join(",".join(s) for s in self.excludable) or "none"
            raise EngineError("InvalidValue", f"{UNSUPPORTED} ({why}; declared: {decl})")
        if not self.supported:  # a declared combination this engine cannot search
            raise EngineError("NotImplemented", f"{NO_EXCLUDE} (gpuroute excludes classes on a customized overlay: "
                                                "build a dataset with `gpuroute build GRAPH -o DIR` and serve DIR)")
        ex = self._excl.get(mask)
        if ex is None:  # a race makes two equal ones, harmlessly
            ex = self._excl[mask] = Exclusion(self, mask, self._masks[mask], (self._arc_classes & mask) != 0)
        return ex if avoid is None else self._avoiding(mask, ex.names, ex.excluded | avoid)

    def _avoiding(self, mask, names, excluded):
        import hashlib

        digest = hashlib.blake2b(np.packbits(excluded).tobytes(), digest_size=16).hexdigest()
        return Exclusion(self, mask, names, excluded, key=("avoid", mask, digest))

    def info(self):
        """``{"classes", "excludable", "supported", "cached", "stats"}`` (plain data, for ``/health``)."""
        with self._lock:
            cached = [",".join(self._masks[m]) for m in self._cache]
            stats = dict(self.stats)
        return {"classes": list(self.classes), "excludable": [list(s) for s in self.excludable],
                "supported": bool(self.supported and self.excludable and self._arc_classes is not None),
                "cached": cached, "avoid_cached": len(self._avoid_cache), "stats": stats}

    # ------------------------------------------------------------------ parts
    def _segments(self, ex, component):
        key = (ex.key, component)
        seg = self._avoid_seg if ex.avoids else self._seg
        with self._lock:
            idx = seg.get(key)
            if idx is not None and ex.avoids:
                seg.move_to_end(key)
        if idx is None:
            from ..geo.segments import SegmentIndex

            try:
                idx = SegmentIndex(self.engine.graph, component=component, arc_mask=~ex.excluded)
            except ValueError:  # every segment excluded
                raise EngineError("NoSegment", f"no segment is left to snap to with exclude={','.join(ex.names)}"
                                  f"{' and the avoids' if ex.avoids else ''}") from None
            with self._lock:
                seg[key] = idx  # a race builds two, harmlessly
                if ex.avoids:
                    keep = max(0, int(config.SERVE_AVOID_CACHE))
                    while len(seg) > keep:
                        seg.popitem(last=False)
        return idx

    def _snapshot(self, ex):
        tr = self.engine._traffic
        ov = tr.overlay
        cache = self._avoid_cache if ex.avoids else self._cache
        hit = self._lookup(ex.key, ov._need_state(), cache=cache)
        if hit is not None:
            return hit
        with tr._lock:  # one customization at a time (the GPU's buffers); the overlay's state stays put
            base = ov._need_state()
            hit = self._lookup(ex.key, base, count=False, cache=cache)
            if hit is not None:
                return hit
            st = ov.customized_state(excluded_metric(base.metric, ov.turns, ex.excluded))
            st.arc_duration = base.arc_duration  # the base's live travel times (speed updates) go along
            snap = tr.snapshot(st)
            with self._lock:
                self.stats["customizations"] += 1
                keep = max(0, int(config.SERVE_AVOID_CACHE if ex.avoids else config.SERVE_EXCLUDE_CACHE))
                if keep:
                    cache[ex.key] = (base, snap)
                    cache.move_to_end(ex.key)
                    while len(cache) > keep:
                        cache.popitem(last=False)
                        self.stats["evicted"] += 1
        return snap

    def _lookup(self, mask, base, count=True, cache=None):
        """The cached snapshot of ``mask`` (an :attr:`Exclusion.key`) in ``cache`` (default: the
        combinations') derived from overlay state ``base``, or None (a miss); drops the entries derived
        from other states."""
        cache = self._cache if cache is None else cache
        with self._lock:
            stale = [m for m, (b, _) in cache.items() if b is not base]
            for m in stale:
                del cache[m]
            self.stats["evicted"] += len(stale)
            entry = cache.get(mask)
            if entry is not None:
                cache.move_to_end(mask)
            if count:
                self.stats["hits" if entry is not None else "misses"] += 1
            return None if entry is None else entry[1]

    def _isochrone_metric(self, ex, met):
        from .services.isochrone.search import Metric as IsoMetric

        key = (ex.key, id(met))
        with self._lock:
            hit = self._iso.get(key)
            if hit is not None and hit[0] is met:
                return hit[1]
        first, out_arc, tcost = met.turns
        tcost = np.where(ex.excluded[out_arc], -1.0, tcost)
        out = IsoMetric(met.name, met.w, met.scale, turns=(first, out_arc, tcost))
        with self._lock:
            self._iso[key] = (met, out)
            while len(self._iso) > 2 * max(1, len(self._masks)) + max(0, int(config.SERVE_AVOID_CACHE)):
                self._iso.popitem(last=False)
        return out
