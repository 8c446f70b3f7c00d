"""Tables and accessibility over a Dask cluster: the hierarchy (or graph) is scattered once to every
worker (``client.scatter(..., broadcast=True)``, once per client and hierarchy: each worker deserialises
it once and keeps it, with its GPU copy, for every task of every later call), blocks of sources are mapped as tasks (``client.submit``), and results are
gathered in block order or written by the workers (one ``.npy`` or Parquet file per block). Dask's
scheduler places the tasks; nothing here schedules.

Results equal the single-process ones: a table block is ``ch.table(block, targets)`` (integers), nearest
POI lists merge exactly (the k smallest (distance, poi) pairs), and aggregates merge mergeable
accumulators (sums in block order, so within float64 rounding of a local run; counts, min and max exact).
"""
from __future__ import annotations

import contextlib
import os
import uuid
import weakref

import numpy as np

from .. import config

#: ``scheduler`` values besides an address: an in-process CPU cluster, or one worker per local GPU.
SCHEDULERS = ("local", "local-cuda")


def _require():
    from ..extras import require

    require("distributed", "gpuroute.distributed")


@contextlib.contextmanager
def connect(scheduler, *, n_workers=None, threads_per_worker=None):
    """A ``distributed.Client`` for ``scheduler``, closed (with any cluster made here) on exit.

    Parameters
    ----------
    scheduler : str or distributed.Client
        A scheduler address (``tcp://host:8786``, ``host:8786``); ``"local"``: a ``LocalCluster`` of
        ``n_workers`` processes (default 1: numba already runs on every core of a process), each with
        ``threads_per_worker`` threads (default 1); ``"local-cuda"``: ``dask_cuda.LocalCUDACluster``, one
        worker per visible GPU; a Client: used as it is (not closed).

    Raises
    ------
    ImportError
        dask/distributed missing, or ``"local-cuda"`` without dask-cuda.
    ValueError
        An empty scheduler string.
    """
    _require()
    from distributed import Client, LocalCluster

    if isinstance(scheduler, Client):
        yield scheduler
        return
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be an address, 'local' or 'local-cuda', got {scheduler!r}")
    cluster = None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=n_workers or 1, threads_per_worker=threads_per_worker or 1,
                               processes=True, dashboard_address=None)
    elif scheduler == "local-cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as e:
            raise ImportError("--scheduler local-cuda needs dask-cuda (pip install dask-cuda): one worker per GPU "
                              f"({e})") from None
        kw = {"n_workers": n_workers} if n_workers else {}
        cluster = LocalCUDACluster(threads_per_worker=threads_per_worker or 1, dashboard_address=None, **kw)
    try:
        client = Client(cluster if cluster is not None else scheduler)
        try:
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


class Shipped:
    """A hierarchy shipped to workers: its arrays, weight and method only (no graph, no caches, no GPU
    copy); the worker-side :class:`~gpuroute.ch.ContractionHierarchy` is made on first use and kept with
    the scattered object, so its GPU copy is uploaded once per worker."""

    def __init__(self, ch):
        self.h, self.weight, self.method = ch.h, ch.weight, ch.method
        self.token = uuid.uuid4().hex
        self._ch = None

    def __getstate__(self):
        return {"h": self.h, "weight": self.weight, "method": self.method, "token": self.token}

    def __setstate__(self, st):
        self.__dict__.update(st)
        self._ch = None

    def ch(self):
        if self._ch is None:
            from ..ch import ContractionHierarchy

            self._ch = ContractionHierarchy(self.h, graph=None, weight=self.weight, method=self.method)
        return self._ch


_SCATTERED = weakref.WeakKeyDictionary()  # network object -> {(client id, what): Future of its payload}


def broadcast(client, owner, what, make):
    """The future of ``make()`` scattered to every worker (``broadcast=True``), once per client and network
    object ``owner`` (kept while ``owner`` lives): later calls reuse the copy each worker holds, and with it
    the GPU copy the worker built."""
    per = _SCATTERED.get(owner)
    if per is None:
        per = _SCATTERED[owner] = {}
    key = (client.id, what)
    fut = per.get(key)
    if fut is None or fut.status != "finished":
        fut = per[key] = client.scatter(make(), broadcast=True, hash=False)
    return fut


def _blocks(k, block):
    block = int(block)
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return [(lo, min(k, lo + block)) for lo in range(0, k, block)]


def _write_manifest(out, kind, items, extra):
    """``out/manifest.json`` listing the blocks (each with its file's SHA-256), with the store's
    ``integrity`` entry, replaced atomically (:func:`gpuroute.store.write_manifest`)."""
    from .. import store

    store.write_manifest(out, {"kind": kind, "blocks": items, **extra}, atomic=True, what="table manifest")
    return os.path.join(out, store.MANIFEST)


# ---------------------------------------------------------------------------------------------- table
def _table_task(shipped, targets, sources, device, dtype, out, fmt, lo):
    from ..backend import resolve_device

    dev = resolve_device(device)
    d = shipped.ch().table(sources, targets, device=dev, dtype=dtype)
    d = np.asarray(d)
    if out is None:
        return d
    from ..store import atomic_file, sha256_file, write_npy_atomic

    if fmt == "npy":
        path = write_npy_atomic(os.path.join(out, f"table_{lo:09d}.npy"), d)
    else:
        from ..extras import require

        pd = require("pandas", "distributed.table(fmt='parquet')")
        from ..graph.constants import INF, INF_U32

        t = d.astype(np.float64)
        t[d == (INF_U32 if d.dtype == np.uint32 else INF)] = np.nan
        df = pd.DataFrame({"from_id": np.repeat(sources, targets.size), "to_id": np.tile(targets, sources.size),
                           "distance": t.ravel()})
        path = os.path.join(out, f"table_{lo:09d}.parquet")
        with atomic_file(path, "wb") as f:
            df.to_parquet(f, index=False)
    return {"path": path, "rows": [int(lo), int(lo + sources.size)], "device": dev, "sha256": sha256_file(path)}


def table(client, ch, sources, targets, *, block=None, device="auto", dtype="int64", out=None, fmt="npy",
          gather=True):
    """Many-to-many distances over a Dask cluster, equal to ``ch.table(sources, targets)``.

    Parameters
    ----------
    client : distributed.Client
    ch : ContractionHierarchy
        Scattered once to every worker (its arrays only).
    sources, targets : array_like of int
        Internal node ids.
    block : int, optional
        Sources per task (default ``config.DIST_TABLE_BLOCK``); each task is one ``ch.table`` on a worker.
    device : {"auto", "cpu", "gpu"}
        Resolved on each worker (``"auto"``: its GPU when it has one).
    dtype : {"int64", "uint32"}
    out : str, optional
        A directory: each worker writes its block there instead of sending it back -- ``fmt="npy"``:
        ``table_<first row>.npy`` (rows x |T|, ``dtype``), ``fmt="parquet"``: ``table_<first row>.parquet``
        (long: ``from_id``, ``to_id``, ``distance`` float64 with NaN where unreachable); plus
        ``manifest.json`` listing the blocks (with each file's SHA-256 and the store's ``integrity``
        entry, :mod:`gpuroute.store`). The directory must be reachable by every worker.
    fmt : {"npy", "parquet"}
    gather : bool, default True
        False (without ``out``): leave the blocks in the workers' memory and return them as Dask futures,
        for further distributed work (``client.gather`` fetches them; ``distributed.wait`` waits).

    Returns
    -------
    ndarray, shape (|S|, |T|)
        ``INF`` (``INF_U32``) where unreachable; or, with ``out``, the list of block records
        (``path``, ``rows`` [first, end), ``device``, ``sha256`` of the file); or, with ``gather=False``, a list of ``(first row,
        future)`` pairs in row order, each future a (rows, |T|) block.

    Raises
    ------
    IndexError
        An id outside ``[0, n)``.
    ValueError
        ``block < 1``, an unknown ``fmt`` or ``dtype``.
    ImportError
        dask/distributed missing.
    """
    _require()
    from ..ch.api import node_ids

    n = ch.n_nodes
    s, _ = node_ids(n, sources, "sources")
    t, _ = node_ids(n, targets, "targets")
    if dtype not in ("int64", "uint32"):
        raise ValueError(f"dtype must be 'int64' or 'uint32', got {dtype!r}")
    if fmt not in ("npy", "parquet"):
        raise ValueError(f"fmt must be 'npy' or 'parquet', got {fmt!r}")
    blocks = _blocks(s.size, config.DIST_TABLE_BLOCK if block is None else block)
    if out is not None:
        out = os.path.abspath(out)
        os.makedirs(out, exist_ok=True)
    if not blocks:
        return np.zeros((0, t.size), dtype=np.dtype(dtype)) if out is None else []
    shipped = broadcast(client, ch, "hierarchy", lambda: Shipped(ch))
    tf = client.scatter(t, broadcast=True, hash=False)
    futs = [client.submit(_table_task, shipped, tf, s[lo:hi], device, dtype, out, fmt, lo, pure=False)
            for lo, hi in blocks]
    if out is None and not gather:
        return [(lo, f) for (lo, _), f in zip(blocks, futs, strict=True)]
    res = client.gather(futs)
    if out is None:
        return np.concatenate(res, axis=0)
    _write_manifest(out, "table", res, {"shape": [int(s.size), int(t.size)], "dtype": dtype, "format": fmt})
    return res


# ---------------------------------------------------------------------------------------------- accessibility
def _agg_task(ix, nodes, values, bound, radius, decay, mode, device, strategy):
    from ..accessibility.api import partial_aggregate
    from ..backend import resolve_device

    dev = resolve_device(device)
    return partial_aggregate(ix, nodes, values, bound, radius, decay, mode, device=dev, strategy=strategy)


def _near_task(ix, nodes, ids, bound, k, device, strategy):
    from ..accessibility.api import partial_nearest
    from ..backend import resolve_device

    dev = resolve_device(device)
    return partial_nearest(ix, nodes, bound, k, device=dev, strategy=strategy, ids=ids)


def _point_blocks(nodes, block):
    """Blocks of positions into ``nodes`` grouping every value of a node in one block, ``block`` distinct
    nodes each (ascending node order)."""
    order = np.argsort(nodes, kind="stable")
    ns = nodes[order]
    starts = np.flatnonzero(np.r_[True, ns[1:] != ns[:-1]]) if ns.size else np.zeros(0, dtype=np.int64)
    cuts = list(starts[::int(block)]) + [ns.size]
    return [order[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def aggregate(client, index, node_ids, values=None, radius=None, *, type="sum", decay="flat", weight=None, block=None,
              device="auto", empty="pandana", snapping="default", unit=None):
    """:func:`gpuroute.accessibility.aggregate` over a Dask cluster: the network is scattered once per
    worker, each task aggregates ``block`` distinct point nodes (default ``config.DIST_ACCESS_BLOCK``) into
    mergeable accumulators (n,), merged here in block order.

    Parameters and result as :func:`gpuroute.accessibility.aggregate` (``strategy`` is the points
    formulation: the points are what is split). With ``device="gpu"`` and a bare graph every worker builds
    its own hierarchy: pass one.

    Raises
    ------
    As :func:`gpuroute.accessibility.aggregate`; ImportError without dask/distributed.
    """
    _require()
    from ..accessibility import api
    from ..accessibility.cpu import DECAYS, MODES, merge_acc
    from ..accessibility.index import AccessIndex

    if radius is None:
        raise TypeError("aggregate() needs a radius (e.g. '2 km')")
    ix = AccessIndex(index, weight)
    r, bound = api.radius_in_weight_units(radius, ix, unit)
    t = api._type(type)
    d = api._decay(decay, r)
    nodes = api.resolve_nodes(ix, node_ids, "node_ids", snapping)
    vals = api._values(values, node_ids, nodes.size)
    mode = MODES[t]
    parts = _point_blocks(nodes, config.DIST_ACCESS_BLOCK if block is None else block)
    if not parts:
        from ..accessibility.cpu import init_acc

        return api.finish(init_acc(mode, ix.n), t, empty)
    shipped = broadcast(client, ix.ch if ix.ch is not None else ix.graph, ("access", ix.weight), lambda: ix)
    futs = [client.submit(_agg_task, shipped, nodes[p], vals[p], bound, r, DECAYS[d], mode, device, "points",
                          pure=False) for p in parts]
    acc = None
    for part in client.gather(futs):
        acc = tuple(np.array(a) for a in part) if acc is None else merge_acc(mode, acc, part)
    return api.finish(acc, t, empty)


def nearest_pois(client, index, poi_node_ids, radius, k=1, *, weight=None, block=None, device="auto",
                 max_distance=None, snapping="default", unit=None):
    """:func:`gpuroute.accessibility.nearest_pois` over a Dask cluster (the POIs split into blocks of
    ``block`` distinct nodes, each task's (n, k) lists merged exactly here).

    Returns
    -------
    distances float64 (n, k), poi_ids int64 (n, k)
        As :func:`gpuroute.accessibility.nearest_pois`.
    """
    _require()
    from ..accessibility import api
    from ..accessibility.cpu import empty_lists, merge_lists
    from ..accessibility.index import AccessIndex

    ix = AccessIndex(index, weight)
    r, bound = api.radius_in_weight_units(radius, ix, unit)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    k = int(k)
    nodes = api.resolve_nodes(ix, poi_node_ids, "poi_node_ids", snapping)
    parts = _point_blocks(nodes, config.DIST_ACCESS_BLOCK if block is None else block)
    lists = empty_lists((ix.n, k))
    if parts:
        shipped = broadcast(client, ix.ch if ix.ch is not None else ix.graph, ("access", ix.weight), lambda: ix)
        futs = [client.submit(_near_task, shipped, nodes[p], p.astype(np.int64), bound, k, device, "points",
                              pure=False) for p in parts]
        for part in client.gather(futs):
            merge_lists(k, lists, part)
    f = api.distance_factor(radius, ix, unit)
    return api.finish_nearest(lists, r * f if max_distance is None else float(max_distance), f)
