"""DeviceGraph: a graph's CSR and one weight (metric) resident on the GPU, with an explicit owner.

The caller (or a query object) creates it, passes it to GPU solvers, and releases it; nothing is
written into the RoadGraph. ``DeviceGraph.shared(graph, weight)`` returns the one instance the
functional API uses for a (graph, weight) pair, so a weight given as ``None`` and by its name never
uploads the same arrays twice; it is released with the graph (weak reference) or by
:func:`release_shared`.
"""
from __future__ import annotations

import weakref

_SHARED = weakref.WeakKeyDictionary()  # RoadGraph -> {weight name: DeviceGraph}


class DeviceGraph:
    """Forward CSR (``first_out``, ``head``) and one weight of a :class:`~gpuroute.graph.RoadGraph` on
    the GPU, int32 CuPy arrays; the reverse CSR (``rev_first_out``, ``rev_tail``, ``rev_weight``: the
    in-arcs of each node with their weights) is uploaded on first use.

    Parameters
    ----------
    graph : RoadGraph
    weight : str, optional
        Weight name (None: the graph's default weight; stored resolved in :attr:`weight_name`).

    Raises
    ------
    KeyError
        Unknown weight.
    GPUUnavailableError
        Without a usable GPU.

    Notes
    -----
    Use as a context manager or call :meth:`release`; after release every array attribute is None and
    a solver using it raises.
    """

    def __init__(self, graph, weight=None, *, keep_graph=True):
        from . import resolve_device

        resolve_device("gpu")
        import cupy as cp

        # the functional API's instances hold the graph weakly (they live in a WeakKeyDictionary keyed
        # by the graph: a strong reference would keep the graph, and its GPU arrays, alive forever)
        self._graph = graph if keep_graph else weakref.ref(graph)
        self._weak = not keep_graph
        self.weight_name = graph.default_weight if weight is None else weight
        w = graph.weight(self.weight_name)
        self.n_nodes = graph.n_nodes
        self.n_arcs = graph.n_arcs
        self.first_out = cp.asarray(graph.first_out)
        self.head = cp.asarray(graph.head)
        self.weight = cp.asarray(w)
        self.max_weight = int(w.max()) if w.size else 0
        self.min_weight = int(w.min()) if w.size else 0
        self.mean_weight = float(w.mean()) if w.size else 0.0
        self._rev = None
        self._extra = {}
        #: Query objects the functional ``sssp(dgraph, ...)`` built on this upload (owned: released with it).
        self.queries = {}
        cp.cuda.Device().synchronize()  # uploads ran on the default stream: done before any solver stream

    @property
    def graph(self):
        """The RoadGraph this was uploaded from."""
        g = self._graph() if self._weak else self._graph
        if g is None:
            raise RuntimeError("the RoadGraph of this DeviceGraph was garbage collected")
        return g

    # ------------------------------------------------------------------ owned extras
    def reverse(self):
        """``(rev_first_out, rev_tail, rev_weight)`` on the device (uploaded once)."""
        self._check()
        if self._rev is None:
            import cupy as cp

            g = self.graph
            self._rev = (cp.asarray(g.rev_first_out), cp.asarray(g.rev_tail),
                         cp.asarray(g.weight(self.weight_name)[g.rev_arc]))
            cp.cuda.Device().synchronize()
        return self._rev

    def extra(self, key, build):
        """A further device structure derived from this graph and weight (e.g. a cell layout), built
        once by ``build()`` and released with this object."""
        self._check()
        if key not in self._extra:
            import cupy as cp

            self._extra[key] = build()
            cp.cuda.Device().synchronize()
        return self._extra[key]

    @property
    def csr(self):
        """``(first_out, head, weight)``."""
        self._check()
        return self.first_out, self.head, self.weight

    @property
    def nbytes(self) -> int:
        """Device bytes held (CSR, weight, reverse CSR when uploaded; not the extras)."""
        arrays = [self.first_out, self.head, self.weight] + list(self._rev or ())
        return int(sum(a.nbytes for a in arrays if a is not None))

    def _check(self):
        if self.first_out is None:
            raise RuntimeError("this DeviceGraph was released")

    def release(self):
        """Free the device arrays now (they are also freed when this object is garbage collected)."""
        self.first_out = self.head = self.weight = None
        self._rev = None
        self._extra = {}
        self.queries = {}

    @property
    def released(self) -> bool:
        return self.first_out is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        state = "released" if self.released else f"{self.nbytes / 2**20:.1f} MiB"
        g = self._graph() if self._weak else self._graph
        return f"DeviceGraph({getattr(g, 'name', '?')!r}, weight={self.weight_name!r}, {state})"

    # ------------------------------------------------------------------ the functional API's instance
    @classmethod
    def shared(cls, graph, weight=None):
        """The DeviceGraph the functional API uses for ``(graph, weight)``: one per resolved weight name,
        released when ``graph`` is garbage collected or by :func:`release_shared`."""
        name = graph.default_weight if weight is None else weight
        graph.weight(name)  # KeyError for an unknown weight
        per = _SHARED.setdefault(graph, {})
        dg = per.get(name)
        if dg is None or dg.released:
            dg = per[name] = cls(graph, name, keep_graph=False)
        return dg


def release_shared(graph=None):
    """Release the shared DeviceGraphs of ``graph`` (of every graph when None) and the solvers built on
    them by the functional API."""
    graphs = [graph] if graph is not None else list(_SHARED.keys())
    for g in graphs:
        for dg in _SHARED.pop(g, {}).values():
            dg.release()
