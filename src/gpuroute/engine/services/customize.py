"""The customize service (live traffic, ``POST /customize``) past validation: new arc costs or a new
metric applied to the overlay atomically (:meth:`gpuroute.engine.traffic.TrafficRouter.customize`) and
saved to a dataset directory's ``traffic.npz`` (:class:`gpuroute.engine.dataset.TrafficStore`).
"""
from __future__ import annotations

from ..osrm import EngineError

__all__ = ["customize", "warm"]


def customize(engine, updates=None, *, metric=None):
    """:meth:`gpuroute.engine.Engine.customize`: the router's answer dict.

    Raises
    ------
    EngineError
        ``NotImplemented`` (no overlay), and the router's ``InvalidOptions`` / ``InvalidValue``.
    OSError
        The traffic could not be saved (the customization was undone).
    """
    from ..dataset import traffic_store

    if engine._traffic is None:
        raise EngineError("NotImplemented", "this engine has no overlay to customize: build a dataset with "
                                            "`gpuroute build GRAPH -o DIR` and open (or serve) DIR")
    store = traffic_store(engine.overlay)
    return engine._traffic.customize(updates, metric, persist=None if store is None else store.save)


def warm(engine):
    """Run the kernels of :func:`customize` once without changing the metric (the server's warm-up); False
    without an overlay (nothing to warm)."""
    if engine._traffic is None:
        return False
    engine._traffic.warm()
    return True
