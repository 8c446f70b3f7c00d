"""Hub-label queries on the GPU (kernels in ``labels.cu``): paired distances and tables from the hub labels
of a hierarchy (Abraham, Delling, Goldberg, Werneck, "A Hub-Based Labeling Algorithm for Shortest Paths on
Road Networks", SEA 2011), one warp a query. The labels are built on the CPU
(:class:`gpuroute.ch.query.HubLabels`, opt-in through ``ContractionHierarchy.hub_labels()``) and uploaded
once; the numba twin is :func:`gpuroute.ch.query.distances_cpu` with labels (the same merge, the same
results).
"""
from __future__ import annotations

import threading

import numpy as np

from ..backend.kernels import load_module


class GPUHubLabels:
    """The hub labels of one hierarchy on the GPU.

    Parameters
    ----------
    labels : gpuroute.ch.query.HubLabels

    Attributes
    ----------
    nbytes : int
        Device bytes held (``node`` int64 (n + 1, 4), ``hub`` int32, ``dist`` int32 or int64).

    Raises
    ------
    GPUUnavailableError
        Without a usable GPU.
    """

    #: threads a block (8 warps, 8 queries)
    THREADS = 256

    def __init__(self, labels):
        import cupy as cp

        from ..backend import resolve_device

        resolve_device("gpu")
        self.cp = cp
        self.labels = labels
        self.node = cp.asarray(np.ascontiguousarray(labels.node, dtype=np.int64).ravel())
        self.hub = cp.asarray(np.ascontiguousarray(labels.hub, dtype=np.int32))
        wide = labels.dist.dtype != np.int32
        self.dist = cp.asarray(np.ascontiguousarray(labels.dist, dtype=np.int64 if wide else np.int32))
        self.node_lid = np.asarray(labels.node_lid, dtype=np.int64)
        mod = load_module("ch/labels.cu")
        self.k_pairs = mod.get_function("hl_pairs64" if wide else "hl_pairs32")
        self.k_table = mod.get_function("hl_table64" if wide else "hl_table32")
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.lock = threading.Lock()  # one caller at a time on the stream
        cp.cuda.Device().synchronize()

    @property
    def nbytes(self):
        return int(self.node.nbytes + self.hub.nbytes + self.dist.nbytes)

    def _lids(self, nodes):
        return self.cp.asarray(self.node_lid[nodes].astype(np.int32))

    def _grid(self, queries):
        return (int(-(-int(queries) * 32 // self.THREADS)),)

    def distances(self, sources, targets):
        """Paired distances ``dist(sources[i], targets[i])``.

        Parameters
        ----------
        sources, targets : ndarray int64, shape (k,)
            Node ids (validated by the caller).

        Returns
        -------
        cupy.ndarray int64, shape (k,)
            In the weight's unit; ``INF`` where unreachable, 0 where ``sources[i] == targets[i]``.
        """
        cp = self.cp
        m = int(sources.size)
        with self.lock, self.stream:
            out = cp.empty(m, dtype=cp.int64)
            if m:
                self.k_pairs(self._grid(m), (self.THREADS,),
                             (np.int64(m), self.node, self.hub, self.dist, self._lids(sources), self._lids(targets), out))
            self.stream.synchronize()
        return out

    def table(self, sources, targets):
        """Many-to-many distances.

        Parameters
        ----------
        sources : ndarray int64, shape (S,)
        targets : ndarray int64, shape (T,)

        Returns
        -------
        cupy.ndarray int64, shape (S, T)
            ``INF`` where unreachable.
        """
        cp = self.cp
        ns, nt = int(sources.size), int(targets.size)
        with self.lock, self.stream:
            out = cp.empty((ns, nt), dtype=cp.int64)
            if ns and nt:
                self.k_table(self._grid(ns * nt), (self.THREADS,),
                             (np.int32(ns), np.int32(nt), self.node, self.hub, self.dist, self._lids(sources),
                              self._lids(targets), out))
            self.stream.synchronize()
        return out

    def release(self):
        """Free the device copies."""
        self.node = self.hub = self.dist = None
