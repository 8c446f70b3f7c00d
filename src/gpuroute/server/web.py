"""The web page at ``/``: an offline map of the served network with routes, isochrones and traffic.

The page (``web/index.html``, ``app.js``, ``app.css`` beside this module) draws the road network itself
with Leaflet from ``GET /network`` (no tile server), routes between two clicked points with
leaflet-routing-machine's OSRM v1 router pointed at this server's ``/route/v1/driving/...`` (so the page
is an OSRM client like any other) with ``alternatives=N`` (drawn dashed, selectable), ``avoid_polygons``
(areas drawn with leaflet-geoman) and, when ``/health`` reports a time profile, ``depart_at`` (a day and a
time-of-day slider), draws isochrone rings from ``/isochrone/v1`` and scales travel times with a traffic
slider through ``POST /customize``, showing the customization time the server answers. The page itself
is served with :data:`PAGE_HEADERS` (a Content-Security-Policy: its own scripts only; no framing by other
sites).

Routes added to :func:`gpuroute.server.create_app`
--------------------------------------------------
* ``GET /``: the page; when the third-party assets are missing, a page saying how to fetch them
  (``make web-assets``), never an error.
* ``GET /web/{file}``: the page's own files (this package's ``web/`` folder).
* ``GET /vendor/{package}/{path}``: the fetched Leaflet, leaflet-routing-machine and leaflet-geoman-free
  files (:data:`VENDOR`: their ``dist/`` folders and licences only), from :func:`assets_dir`.
* ``GET /THIRD-PARTY``: the third-party notice (``web/THIRD-PARTY.md``), licences included.
* ``GET /network[?max_edges=N]``: the network as compact arrays (:func:`network`), at most
  ``config.SERVE_WEB_MAX_EDGES`` segments (thinned to the most important roads beyond that, and said
  so), gzipped for clients that accept it.

The third-party JavaScript is not in the repository: ``.ci/fetch_web.sh`` (``make web-assets``) fetches
the pinned npm packages into ``.venv/web``; :func:`assets_dir` finds them.
"""
from __future__ import annotations

import gzip
import os
import sys
import threading
from pathlib import Path

import numpy as np

from .. import config
from ..geo import haversine_m

#: Where this package keeps the page's own files.
WEB_DIR = Path(__file__).resolve().parent / "web"

#: The environment variable naming the assets directory (overrides ``config.SERVE_WEB_ASSETS``).
ASSETS_ENV = "GPUROUTE_WEB_ASSETS"

#: The third-party packages the page loads: name -> (pinned version, files the page needs, licence file).
VENDOR = {
    "leaflet": ("1.9.4", ("dist/leaflet.js", "dist/leaflet.css", "dist/images/marker-icon.png"), "LICENSE"),
    "leaflet-routing-machine": ("3.2.12", ("dist/leaflet-routing-machine.js", "dist/leaflet-routing-machine.css"),
                                "LICENSE.md"),
    "leaflet-geoman-free": ("2.20.2", ("dist/leaflet-geoman.js", "dist/leaflet-geoman.css"), "LICENSE"),
}

#: The headers of the page itself: its scripts, styles, images and requests come from this server only
#: (no inline script, so markup that slipped into the page -- a street name in the itinerary -- runs
#: nothing), and no other site may frame it (a framed page's traffic slider, clicked through a decoy,
#: would ``POST /customize`` from the server's own origin: clickjacking).
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

#: File endings served from the assets (scripts, styles, images, licences).
_SERVED = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png",
           ".svg": "image/svg+xml", ".md": "text/plain; charset=utf-8", "": "text/plain; charset=utf-8",
           ".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8"}

#: Road classes (OSM ``highway`` values) drawn as major and medium roads; the others are minor.
MAJOR = ("motorway", "motorway_link", "trunk", "trunk_link", "primary", "primary_link")
MEDIUM = ("secondary", "secondary_link", "tertiary", "tertiary_link")


def assets_dir():
    """The directory the third-party assets are looked for in (it may not exist).

    ``$GPUROUTE_WEB_ASSETS``, else ``config.SERVE_WEB_ASSETS``, else ``web/`` under ``sys.prefix`` when
    that holds them (the project's ``.venv/web``), else ``.venv/web`` beside the source checkout (an
    editable install run by another interpreter), else ``sys.prefix``'s.

    Returns
    -------
    pathlib.Path
    """
    given = os.environ.get(ASSETS_ENV) or config.SERVE_WEB_ASSETS
    if given:
        return Path(given).expanduser()
    candidates = [Path(sys.prefix) / "web", Path(__file__).resolve().parents[3] / ".venv" / "web"]
    for c in candidates:
        if not missing_assets(c):
            return c
    return candidates[0]


def missing_assets(root):
    """The files of :data:`VENDOR` the page needs that are not under ``root`` (``package/path`` strings)."""
    root = Path(root)
    return [f"{name}/{f}" for name, (_, files, _) in VENDOR.items() for f in files if not (root / name / f).is_file()]


def vendor_file(root, package, path):
    """The file ``/vendor/{package}/{path}`` names, or None when it is not one that is served: only
    :data:`VENDOR` packages, only their ``dist/`` files and licence, only :data:`_SERVED` endings, never
    outside ``root/package`` (symbolic links resolved)."""
    if package not in VENDOR or not path or "\\" in path or "\x00" in path:
        return None
    licence = VENDOR[package][2]
    if not (path.startswith("dist/") or path == licence):
        return None
    base = (Path(root) / package).resolve()
    try:
        p = (base / path).resolve()
    except (OSError, RuntimeError):
        return None
    if not (base / "dist" in p.parents or p == base / licence) or not p.is_file() or p.suffix.lower() not in _SERVED:
        return None
    return p


# --------------------------------------------------------------------------------------------------
# The network as compact arrays


def network(engine, max_edges=None, *, with_costs=True):
    """The engine's road network for drawing: its segments as node pairs over a shared node list.

    A segment is one pair of nodes joined by an arc in either or both directions (both directions are
    one line). When the graph has more than ``max_edges`` segments, the most important are kept: lowest
    road class (``arc_attrs["road_class"]``, OSM ``highway`` order), else highest speed (``length_m``,
    else the great-circle length, over the ``travel_time`` weight), else the longest; ties: the longest.
    A segment's class, speed and length are the best of its arcs'.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
        Its ``graph`` (lon/lat ``coords``, ``tail``, ``head``) is drawn; with an ``overlay`` and
        ``with_costs``, the arcs and their base travel times are included for traffic updates.
    max_edges : int, optional
        Most segments returned (default and upper bound ``config.SERVE_WEB_MAX_EDGES``).
    with_costs : bool
        Include ``arcs`` and ``costs`` (when the engine has an overlay and a ``travel_time`` weight).

    Returns
    -------
    dict
        ``code`` ("Ok"); ``graph`` (name); ``attribution`` (the data's, for the map); ``bbox`` ([min lon,
        min lat, max lon, max lat] of the whole graph, degrees); ``nodes`` (flat [lon0, lat0, lon1, ...],
        degrees rounded to 1e-6, only the nodes of the returned segments); ``edges`` (flat [u0, v0, u1,
        v1, ...], indices into ``nodes``' pairs); ``classes`` (per segment: 0 major, 1 medium, 2 minor
        road); ``edges_total``, ``edges_returned``, ``thinned`` (bool) and ``note``; with costs:
        ``arcs`` (flat [forward arc, backward arc] per segment, forward = from ``u`` to ``v``, -1 where
        there is no arc), ``costs`` (their costs in the overlay's ``"time"`` metric, i.e. the
        ``travel_time`` weight, 0 where no arc), ``cost_unit`` (that weight's unit, ``"ds"``:
        deciseconds on OSM graphs) and ``updates_per_post``
        (``config.SERVE_WEB_UPDATES_PER_POST``).

    Raises
    ------
    ValueError
        ``max_edges`` < 1; an engine without a graph with coordinates.
    """
    cap = int(config.SERVE_WEB_MAX_EDGES)
    limit = cap if max_edges is None else min(int(max_edges), cap)
    if limit < 1:
        raise ValueError(f"max_edges={max_edges}: must be >= 1")
    g = getattr(engine, "graph", None)
    coords = None if g is None else getattr(g, "coords", None)
    if coords is None:
        raise ValueError("this engine has no road graph with coordinates to draw")
    coords = np.asarray(coords, dtype=np.float64)
    n = int(g.n_nodes)
    tail = np.asarray(g.tail, dtype=np.int64)
    head = np.asarray(g.head, dtype=np.int64)
    lo, hi = np.minimum(tail, head), np.maximum(tail, head)
    key = lo * n + hi
    seg, arc_seg = np.unique(key, return_inverse=True)
    k_total = int(seg.size)
    su, sv = seg // n, seg % n

    attrs = getattr(g, "arc_attrs", {}) or {}
    length = (np.asarray(attrs["length_m"], dtype=np.float64) if "length_m" in attrs
              else haversine_m(coords[tail, 0], coords[tail, 1], coords[head, 0], coords[head, 1]))
    seg_len = np.zeros(k_total)
    np.maximum.at(seg_len, arc_seg, length)
    names = list((getattr(g, "meta", {}) or {}).get("road_classes") or [])
    if "road_class" in attrs and names:
        rc = np.asarray(attrs["road_class"], dtype=np.int64)
        seg_rc = np.full(k_total, np.iinfo(np.int64).max)
        np.minimum.at(seg_rc, arc_seg, rc)
        rank = seg_rc.astype(np.float64)  # lower code: more important
        table = np.array([0 if c in MAJOR else 1 if c in MEDIUM else 2 for c in names] + [2], dtype=np.int8)
        klass = table[np.minimum(seg_rc, len(names))]
        how = "road class"
    else:
        tt = _travel_time_s(g)
        if tt is not None:  # faster: more important
            value = np.zeros(k_total)
            np.maximum.at(value, arc_seg, np.where(tt > 0, length / np.where(tt > 0, tt, 1.0), 0.0))
            how = "speed"
        else:  # longer: more important
            value, how = seg_len, "length"
        rank = -value
        qs = np.quantile(value, [0.9, 0.6]) if k_total else np.zeros(2)
        klass = np.where(value >= qs[0], 0, np.where(value >= qs[1], 1, 2)).astype(np.int8)
    keep = np.arange(k_total)
    thinned = k_total > limit
    if thinned:
        keep = np.sort(np.lexsort((-seg_len, rank))[:limit])
    used, inv = np.unique(np.concatenate([su[keep], sv[keep]]), return_inverse=True)
    m = keep.size
    edges = np.empty(2 * m, dtype=np.int64)
    edges[0::2], edges[1::2] = inv[:m], inv[m:]
    nodes = np.round(coords[used], 6).ravel()
    if k_total:
        bbox = [float(coords[:, 0].min()), float(coords[:, 1].min()), float(coords[:, 0].max()),
                float(coords[:, 1].max())]
    else:
        bbox = [0.0, 0.0, 0.0, 0.0]
    note = (f"{m:,} of {k_total:,} road segments drawn: the most important by {how} (at most {limit:,}: "
            f"max_edges, or config.SERVE_WEB_MAX_EDGES = {cap:,}); routes use every road" if thinned
            else f"all {k_total:,} road segments drawn")
    meta = getattr(g, "meta", {}) or {}
    attribution = ("Map data © OpenStreetMap contributors (ODbL)" if meta.get("format") == "osm"
                   else f"Road network: {g.name}")
    out = {"code": "Ok", "graph": str(g.name), "attribution": attribution, "bbox": bbox, "nodes": nodes,
           "edges": edges, "classes": klass[keep], "edges_total": k_total, "edges_returned": int(m),
           "thinned": bool(thinned), "note": note}
    tt, unit = _time_costs(g)
    if with_costs and getattr(engine, "overlay", None) is not None and tt is not None:
        arcs = np.full((k_total, 2), -1, dtype=np.int64)
        forward = tail <= head  # from the segment's first node (lower id) to its second
        ids = np.arange(tail.size, dtype=np.int64)
        arcs[arc_seg[forward], 0] = ids[forward]
        arcs[arc_seg[~forward], 1] = ids[~forward]
        arcs = arcs[keep]
        costs = np.where(arcs >= 0, tt[np.maximum(arcs, 0)], 0)
        out.update(arcs=arcs.ravel(), costs=costs.ravel(), cost_unit=unit,
                   updates_per_post=int(config.SERVE_WEB_UPDATES_PER_POST))
    return out


def _time_costs(g):
    """The arc costs of the overlay's ``"time"`` metric (:meth:`gpuroute.crp.Metric.resolve`: the
    ``travel_time`` weight as it is) as int64 (m,), and their unit's symbol; ``(None, None)`` when the
    graph has no ``travel_time`` weight."""
    if "travel_time" not in (getattr(g, "weights", {}) or {}):
        return None, None
    u = (getattr(g, "units", {}) or {}).get("travel_time")
    return np.asarray(g.weight("travel_time")).astype(np.int64), (u.symbol if u is not None else "")


def _travel_time_s(g):
    """The ``travel_time`` weight in seconds (float64 (m,)), or None (no such weight of known scale)."""
    costs, _ = _time_costs(g)
    u = (getattr(g, "units", {}) or {}).get("travel_time")
    if costs is None or u is None or u.quantity != "time" or not u.scale:
        return None
    return costs * float(u.scale)


# --------------------------------------------------------------------------------------------------
# Pages


_MISSING = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuroute: web assets missing</title>
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:46em;margin:3em auto;padding:0 1em}}
code,pre{{background:#f2f2f2;padding:.1em .3em}}</style></head>
<body><h1>gpuroute: the map's JavaScript is not installed</h1>
<p>This server answers the OSRM API (<a href="health">/health</a>), but the page at <code>/</code> needs
{packages} from the npm registry, which are not in the
repository. Missing in <code>{root}</code>:</p>
<pre>{missing}</pre>
<p>Fetch them from the checkout with</p>
<pre>make web-assets        # or: bash .ci/fetch_web.sh</pre>
<p>or point the server at a folder holding them with <code>{env}=/path/to/web</code>, then reload this
page. See <a href="THIRD-PARTY">THIRD-PARTY</a> for their licences.</p>
</body></html>
"""


def missing_page(root, missing):
    """The HTML of ``/`` when assets are missing (``root``: the folder searched; ``missing``: names)."""
    import html

    packages = ", ".join(f"{name} {version}" for name, (version, _, _) in VENDOR.items())
    return _MISSING.format(packages=html.escape(packages),
                           root=html.escape(str(root)), missing=html.escape("\n".join(missing)), env=ASSETS_ENV)


def routes(engine, *, allow_customize=False, assets=None):
    """The Starlette routes of the page (see the module documentation), to put before the OSRM ones.

    Parameters
    ----------
    engine : gpuroute.engine.Engine
    allow_customize : bool
        Whether ``POST /customize`` is served (``/network`` then carries the arcs and their costs).
    assets : path-like, optional
        The third-party assets' directory (default :func:`assets_dir`, looked up at each request, so
        that ``make web-assets`` while the server runs is enough).

    Returns
    -------
    list of starlette.routing.Route
    """
    import anyio.to_thread
    from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route

    from .app import encode

    own = {p.name: p for p in WEB_DIR.iterdir() if p.is_file() and p.suffix in _SERVED} if WEB_DIR.is_dir() else {}
    cache, lock = {}, threading.Lock()

    def root():
        return Path(assets) if assets is not None else assets_dir()

    async def index(request):
        where = root()
        missing = missing_assets(where)
        if missing or "index.html" not in own:
            return HTMLResponse(missing_page(where, missing or ["(the package's web/index.html)"]))
        return FileResponse(own["index.html"], media_type=_SERVED[".html"], headers=PAGE_HEADERS)

    async def web_file(request):
        p = own.get(request.path_params["name"])
        if p is None:
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(p, media_type=_SERVED.get(p.suffix, "application/octet-stream"),
                            headers={"Cache-Control": "no-cache"})

    async def vendor(request):
        where = root()
        p = vendor_file(where, request.path_params["package"], request.path_params["path"])
        if p is None:
            if missing_assets(where):
                return PlainTextResponse("not found: the page's third-party files are not installed in "
                                         f"{where} (make web-assets fetches them)", status_code=404)
            name = f"{request.path_params['package']}/{request.path_params['path']}"
            return PlainTextResponse(f"not found: /vendor/{name} is not one of the files served (the page's "
                                     "third-party files are installed: only their dist/ files and licences are "
                                     "served)", status_code=404)
        return FileResponse(p, media_type=_SERVED[p.suffix.lower()], headers={"Cache-Control": "max-age=3600"})

    async def third_party(request):
        parts = [(WEB_DIR / "THIRD-PARTY.md").read_text(encoding="utf-8") if (WEB_DIR / "THIRD-PARTY.md").is_file()
                 else "Third-party notice missing from the package.\n"]
        for name, (version, _, licence) in VENDOR.items():
            p = root() / name / licence
            text = p.read_text(encoding="utf-8", errors="replace") if p.is_file() else "(not fetched: make web-assets)\n"
            parts.append(f"\n---------------------------------------------------------------------------\n"
                         f"{name} {version}: {licence}\n\n{text}")
        return PlainTextResponse("".join(parts))

    def build(limit):
        with lock:
            if limit not in cache:
                body = encode(network(engine, limit, with_costs=allow_customize))
                if len(cache) >= 4:
                    cache.clear()
                cache[limit] = (body, gzip.compress(body, 5))
            return cache[limit]

    async def network_route(request):
        raw = request.query_params.get("max_edges")
        extra = sorted(set(request.query_params) - {"max_edges"})
        try:
            if extra:
                raise ValueError(f"unknown option {extra[0]!r} (network takes max_edges)")
            digits = None if raw is None else raw.strip().lstrip("+")
            limit = None if raw is None else int(digits) if digits.isascii() and digits.isdigit() else None
            if raw is not None and (limit is None or limit < 1):
                raise ValueError(f"max_edges={raw!r}: expected an integer >= 1")
            limit = int(config.SERVE_WEB_MAX_EDGES) if limit is None else min(limit, int(config.SERVE_WEB_MAX_EDGES))
            body, zipped = await anyio.to_thread.run_sync(build, limit)
        except ValueError as e:
            return Response(encode({"code": "InvalidValue", "message": str(e)}), status_code=400,
                            media_type="application/json")
        headers = {"Access-Control-Allow-Origin": "*", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
            return Response(zipped, media_type="application/json", headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    return [Route("/", index, methods=["GET"]),
            Route("/web/{name}", web_file, methods=["GET"]),
            Route("/vendor/{package}/{path:path}", vendor, methods=["GET"]),
            Route("/THIRD-PARTY", third_party, methods=["GET"]),
            Route("/network", network_route, methods=["GET"])]
