"""The segment index's k-d tree class (:func:`gpuroute.geo.segments.kdtree_class`): scipy's ``cKDTree`` without
the rest of ``scipy.spatial`` (a server's start), one class for every later importer."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_index_loads_no_scipy_spatial_package_and_one_class():
    """In a fresh process: building the index imports the tree's extension module only; a later
    ``import scipy.spatial`` gets the same class (instances, pickles), and the tree answers as one built by
    the package's class."""
    code = textwrap.dedent("""
        import pickle, sys
        import gpuroute
        from gpuroute.geo.segments import SegmentIndex, kdtree_class
        g = gpuroute.open_graph("monaco")
        idx = SegmentIndex(g)
        assert "scipy.spatial" not in sys.modules, "the package was imported"
        cls = type(idx.tree)
        import scipy.spatial
        assert scipy.spatial.cKDTree is cls and kdtree_class() is cls
        assert type(pickle.loads(pickle.dumps(idx.tree))) is cls
        pts = idx.tree.data
        ref = scipy.spatial.cKDTree(pts)
        q = pts[::97] + 3.0
        assert (idx.tree.query(q, k=3)[1] == ref.query(q, k=3)[1]).all()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(SRC)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_another_scipy_layout_falls_back_to_the_package(monkeypatch):
    """Where the extension module's file is not found, nothing is registered and the package's class is used."""
    import importlib.machinery

    from scipy.spatial import cKDTree

    from gpuroute.geo import segments

    monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".no-such-suffix"])
    assert segments._load_kdtree_module("gpuroute_test_ckdtree") is None
    assert "gpuroute_test_ckdtree" not in sys.modules
    monkeypatch.setattr(segments, "_load_kdtree_module", lambda name: None)
    monkeypatch.delitem(sys.modules, "scipy.spatial._ckdtree")
    assert segments.kdtree_class() is cKDTree
