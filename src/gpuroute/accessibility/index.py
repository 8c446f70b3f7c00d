"""What the accessibility searches run on: a graph and its CSRs (CPU), a contraction hierarchy and its
reverse (GPU), resolved once from whatever the caller passed as ``index``.

The reverse hierarchy. A search from a point ``p`` over the *transposed* graph gives ``d(v, p)`` for every
``v``. A hierarchy of the transposed graph needs no new contraction: an up arc ``u -> w`` of the graph's
hierarchy (``rank[w] > rank[u]``) is a down arc ``w -> u`` of the transposed graph's, and a down arc an up
arc; ranks, levels and the core are the same and the core's distance matrix is transposed. PHAST on it
(Delling, Goldberg, Nowatzyk, Werneck, IPDPS 2011) is therefore exact for the transposed graph, which
is what :func:`reverse_hierarchy` builds (views of the same arrays, no copy but the core matrix).
"""
from __future__ import annotations

import logging
import weakref

import numpy as np

from ..ch.hierarchy import Hierarchy

log = logging.getLogger(__name__)

_REVERSE = weakref.WeakKeyDictionary()


def reverse_hierarchy(h):
    """The hierarchy of the transposed graph (see the module doc).

    Parameters
    ----------
    h : Hierarchy

    Returns
    -------
    Hierarchy
        Same ``rank``, ``order``, ``level``, ``core``; ``core_dist`` transposed; ``up`` = ``h``'s down arcs
        (``down_first_out`` is a CSR by head, i.e. by the reversed arcs' tail) and ``down`` = ``h``'s up arcs.
        Its ``*_arc`` ids name the forward graph's arcs (reversed); it serves distances, not paths.
    """
    return Hierarchy(rank=h.rank, order=h.order, level=h.level, core=h.core,
                     core_dist=np.ascontiguousarray(np.asarray(h.core_dist).T),
                     up_first_out=h.down_first_out, up_head=h.down_tail, up_weight=h.down_weight, up_mid=h.down_mid,
                     up_arc=h.down_arc,
                     down_first_out=h.up_first_out, down_tail=h.up_head, down_weight=h.up_weight, down_mid=h.up_mid,
                     down_arc=h.up_arc)


def reverse_ch(ch):
    """A :class:`~gpuroute.ch.ContractionHierarchy` over :func:`reverse_hierarchy` (kept while ``ch``
    lives, so its GPU copy is uploaded once)."""
    from ..ch import ContractionHierarchy

    r = _REVERSE.get(ch)
    if r is None:
        r = _REVERSE[ch] = ContractionHierarchy(reverse_hierarchy(ch.h), graph=None, weight=ch.weight,
                                                method=ch.method, params=ch.params)
    return r


class AccessIndex:
    """The searchable network of one weight: a RoadGraph, a ContractionHierarchy, or both.

    Parameters
    ----------
    index : RoadGraph or ContractionHierarchy or AccessIndex
    weight : str, optional
        The weight (default: the graph's first one, or the hierarchy's).

    Raises
    ------
    TypeError
        ``index`` is neither.
    ValueError
        ``weight`` differs from the hierarchy's.
    KeyError
        The graph has no such weight.
    """

    def __init__(self, index, weight=None):
        from ..ch import ContractionHierarchy
        from ..graph import RoadGraph

        if isinstance(index, AccessIndex):
            if weight is not None and weight != index.weight:
                raise ValueError(f"weight {weight!r} differs from the index's {index.weight!r}")
            self.__dict__.update(index.__dict__)
            return
        if isinstance(index, ContractionHierarchy):
            if weight is not None and weight != index.weight:
                raise ValueError(f"weight {weight!r} differs from the hierarchy's weight {index.weight!r}: "
                                 "build a hierarchy for that weight, or pass the graph")
            self.ch, self.graph, self.weight = index, index.graph, index.weight
        elif isinstance(index, RoadGraph):
            self.graph, self.ch = index, None
            self.weight = index.default_weight if weight is None else weight
            index.weight(self.weight)
        else:
            raise TypeError(f"index must be a RoadGraph or a ContractionHierarchy, got {type(index).__name__}")
        self.n = int(self.graph.n_nodes if self.graph is not None else self.ch.n_nodes)

    # ------------------------------------------------------------------ CPU side
    def _need_graph(self):
        if self.graph is None:
            raise ValueError("the CPU searches run on the graph, but the hierarchy was loaded without it: "
                             "ContractionHierarchy.load(directory, graph=...), or pass device='gpu'")
        return self.graph

    def csr(self):
        """The forward CSR ``(first_out int32 (n+1,), head int32, weight int32)``."""
        g = self._need_graph()
        return g.first_out, g.head, np.ascontiguousarray(g.weight(self.weight))

    def csr_reverse(self):
        """The reverse CSR ``(rev_first_out, rev_tail, weight of each entering arc)`` (kept on the graph)."""
        g = self._need_graph()
        w = g.weight(self.weight)
        return g.derived(("access-rev-csr", self.weight),
                         lambda: (g.rev_first_out, g.rev_tail, np.ascontiguousarray(w[g.rev_arc])))

    # ------------------------------------------------------------------ GPU side
    def hierarchy(self, device="gpu"):
        """The hierarchy (built once per graph and weight when only a graph was given: CU-CH on ``device``)."""
        if self.ch is not None:
            return self.ch
        from ..ch import ContractionHierarchy

        g, wname = self.graph, self.weight

        def build():
            log.info("accessibility: contracting %s for %s on the %s (once per graph)", g.name, wname, device)
            return ContractionHierarchy.build(g, wname, method="cu-ch", device=device, progress=False)

        self.ch = g.derived(("access-ch", wname), build)
        return self.ch

    def reverse(self, device="gpu"):
        """The hierarchy of the transposed graph (:func:`reverse_ch`)."""
        return reverse_ch(self.hierarchy(device))

    # ------------------------------------------------------------------ shipping to workers
    def __getstate__(self):
        # ship arrays only: the graph's derived caches and a hierarchy's GPU copy stay behind
        from ..ch import ContractionHierarchy

        st = {"n": self.n, "weight": self.weight, "graph": None, "ch": None, "h": None}
        if self.graph is not None:
            g = self.graph
            st["graph"] = {"first_out": g.first_out, "head": g.head, "w": g.weight(self.weight), "name": g.name}
        if isinstance(self.ch, ContractionHierarchy):
            st["h"] = (self.ch.h, self.ch.method)
        return st

    def __setstate__(self, st):
        from ..ch import ContractionHierarchy
        from ..graph import RoadGraph

        self.n, self.weight = st["n"], st["weight"]
        self.graph = self.ch = None
        if st["graph"] is not None:
            gs = st["graph"]
            self.graph = RoadGraph(gs["first_out"], gs["head"], {self.weight: gs["w"]}, name=gs["name"])
        if st["h"] is not None:
            h, method = st["h"]
            self.ch = ContractionHierarchy(h, graph=self.graph, weight=self.weight, method=method)
