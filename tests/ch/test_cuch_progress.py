"""The CU-CH progress bar ends at 100 % (the core's nodes counted) and keeps its line (issue 18: the Python
build's bar stopped at 98 % and left the line unterminated)."""
import numpy as np
import tqdm.auto
from naive import random_road_graph

from gpuroute.ch import cuch, sequential


class _Recorder(tqdm.auto.tqdm):
    closed = []

    def close(self):
        if not self.disable:
            _Recorder.closed.append((self.n, self.total, self.leave))
        super().close()


def test_bar_reaches_the_node_count_and_keeps_its_line(monkeypatch):
    monkeypatch.setattr(tqdm.auto, "tqdm", _Recorder)
    monkeypatch.setattr(cuch, "_PROGRESS_MIN_NODES", 0)
    _Recorder.closed.clear()
    g, _ = random_road_graph(np.random.default_rng(2), 300)
    h, stats, params = cuch.build_cuch_cpu(g, K=40, progress=True)
    assert h.core.size > 0  # a core was left to the all-pairs step (the bar counts it too)
    assert _Recorder.closed == [(g.n_nodes, g.n_nodes, True)]
    _Recorder.closed.clear()
    sequential.build_sequential(g, "distance", progress=True)
    assert _Recorder.closed == [(g.n_nodes, g.n_nodes, True)]
