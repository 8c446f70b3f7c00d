"""Microinstructions (gpuroute.crp.microcode; Delling, Kobitzsch, Werneck, Euro-Par 2014, sec. 4).

The numba twin executes the packed instruction arrays exactly as the kernel ``crp_micro`` lays them out
(block headers, layers, compact and wide words, block-relative positions, scratch blocks, output map),
each layer Jacobi-style (every instruction reads ``M`` as the layer found it), so the CI run checks the
kernel's layout: its cliques must equal the Dijkstra customization of the same cells bit for bit (random
graphs with turn penalties, per-turn costs that close turns, and restrictions; the shipped Monaco
extract). The program's invariants (independent layers, first writes before other writes, reads after
writes, encodings that decode to the triples) are checked on their own."""
from __future__ import annotations

import numpy as np
import pytest
from crp_oracle import PEN, with_restrictions
from naive import random_road_graph

import gpuroute
from gpuroute import INF, Overlay, Partition, config
from gpuroute.crp import decode_turn_costs, microcode
from gpuroute.crp.customize import customize_level


def mezz_overlay(g, seed, cell_sizes=(12, 30, 60), mezz=4):
    part = Partition.build(g, cell_sizes=cell_sizes, seed=seed)
    return Overlay.build(g, part, mezzanine={cell_sizes[0]: (mezz,)})


def lowest(ov):
    """The plan's lowest level: (level graph, ent_first, ex_first, cq_first of its cells)."""
    t = ov._plan.topo
    cb = t["cell_base"]
    ef, xf = t["level_first"][0]
    return t["levels"][0], ef, xf, t["cq_first"][cb[0]:cb[1] + 1]


def dijkstra_cliques(ov, tcost):
    lg, ef, xf, cq = lowest(ov)
    out = np.full(int(cq[-1]), -3, np.int64)
    cells = np.arange(lg.vert_first.size - 1, dtype=np.int64)
    customize_level(cells, lg.vert_first, lg.e_first, lg.e_to, lg.e_ref, ef, lg.ent_vert, xf, lg.ex_vert, cq, tcost,
                    out, out, np.zeros(cells.size + 1, np.int64), np.zeros(0, np.uint16))
    return out


def micro_cliques(prog, tcost, n, blocks=None):
    out = np.full(n, -3, np.int64)
    microcode.run(prog, tcost, out, blocks)
    return out


def random_metric(g, rng, ov, close=0.05):
    """Turn costs: travel time + type penalties, a few turns overridden (some closed: -1)."""
    tc = rng.integers(0, 30, ov.turns.out_arc.size).astype(np.int64)
    tc[rng.random(tc.size) < close] = -1
    return (g.weight("travel_time"), PEN) if rng.random() < 0.5 else gpuroute.crp.Metric(
        g.weight("travel_time"), np.array([0, 5, 2, 30]), turn_cost=tc)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("smem_items, compact", [(3072, True), (1024, True), (200, True), (40, True), (3072, False),
                                                 (8, True)])
def test_microcode_equals_dijkstra(seed, smem_items, compact):
    rng = np.random.default_rng(seed)
    g, _ = random_road_graph(rng, 70, one_way=0.3)
    g = with_restrictions(g, rng, 10)
    ov = mezz_overlay(g, seed)
    met = gpuroute.crp.Metric.resolve(g, random_metric(g, rng, ov), turns=ov.turns)
    tcost = decode_turn_costs(met, ov.turns)
    lg, ef, xf, cq = lowest(ov)
    prog = microcode.build_program(lg, ef, xf, cq, smem_items, compact=compact)
    want = dijkstra_cliques(ov, tcost)
    assert (want < INF).any() and (want == INF).any() or want.size < 4
    np.testing.assert_array_equal(micro_cliques(prog, tcost, want.size), want)
    if smem_items < 50:
        assert prog.stats["scratch_blocks"] > 0
    if not compact:
        assert prog.b_wide.all()
    elif microcode.field_bits(smem_items)[1] == 0:  # absolute form: every block in shared memory is compact
        assert not prog.b_wide[prog.b_scr < 0].any()
    assert_program_valid(prog)
    # a partial run (traffic): only the blocks of some cells, the rest untouched
    cells = rng.choice(lg.vert_first.size - 1, 3, replace=False)
    blocks = prog.blocks_of(cells)
    got = micro_cliques(prog, tcost, want.size, blocks)
    for c in cells:
        np.testing.assert_array_equal(got[cq[c]:cq[c + 1]], want[cq[c]:cq[c + 1]])
    ran = np.zeros(want.size, bool)
    for b in blocks:
        ran[prog.o_dst[prog.b_out_first[b]:prog.b_out_first[b + 1]]] = True
    assert (got[~ran] == -3).all()


def assert_program_valid(prog):
    """Per block: the words decode to block-relative positions inside its M; within a layer no two
    instructions write one position and none reads a position written in it; a position is read only
    after it was written (by an arc instruction or an earlier layer); a non-first write follows the
    position's first write; outputs read written positions."""
    for b in range(prog.n_blocks):
        mem = int(prog.b_mem[b])
        written = np.zeros(mem, bool)
        ap = prog.ai_pos[prog.b_arc_first[b]:prog.b_arc_first[b + 1]]
        assert ((ap >= 0) & (ap < mem)).all() and np.unique(ap).size == ap.size
        written[ap] = True
        lw = prog.lay_word[prog.b_lay_first[b]:prog.b_lay_first[b + 1]]
        wide = bool(prog.b_wide[b])
        if prog.b_scr[b] < 0:
            assert mem <= prog.smem_items
        for l0, l1 in zip(lw[:-1], lw[1:], strict=True):
            a, bb, c, first = microcode.decode(prog.words[l0:l1], wide, prog.a_bits, prog.db_bits)
            assert (a < bb).all() and (bb < mem).all() and (c >= 0).all() and (c < mem).all()
            assert np.unique(c).size == c.size, "two writes of one position in a layer"
            assert not np.isin(c, np.concatenate([a, bb])).any(), "a position read and written in one layer"
            assert written[a].all() and written[bb].all(), "a read before any write"
            assert written[c[~first]].all(), "a min-write before the first write"
            written[c] = True
        op = prog.o_pos[prog.b_out_first[b]:prog.b_out_first[b + 1]]
        assert written[op[op >= 0]].all()


@pytest.mark.parametrize("smem_items", [3072, 512, 16384])
def test_encodings_round_trip(smem_items):
    rng = np.random.default_rng(smem_items)
    a_bits, db_bits, dc_bits = microcode.field_bits(smem_items)
    assert (1 << a_bits) >= smem_items
    if db_bits == 0:  # the absolute form: three positions below 2**a_bits
        assert 3 * a_bits <= 31 and dc_bits == 0
        a, b, c = (rng.integers(0, 2 ** a_bits, 500) for _ in range(3))
    else:
        assert a_bits + db_bits + dc_bits == 31
        a = rng.integers(0, 2 ** a_bits, 500)
        b = a + rng.integers(1, 2 ** db_bits + 1, 500)
        c = np.clip(b + rng.integers(-(2 ** (dc_bits - 1)), 2 ** (dc_bits - 1), 500), 0, None)
    first = rng.random(500) < 0.3
    assert microcode.is_compact(a, b, c, db_bits, dc_bits)
    for wide, words in ((False, microcode.encode_compact(a, b, c, first, a_bits, db_bits)),
                        (True, microcode.encode_wide(a, b, c, first))):
        da, db, dc, df = microcode.decode(words, wide, a_bits, db_bits)
        np.testing.assert_array_equal(da, a)
        np.testing.assert_array_equal(db, b)
        np.testing.assert_array_equal(dc, c)
        np.testing.assert_array_equal(df, first)
    if db_bits:
        assert not microcode.is_compact(a[:1], a[:1] + 2 ** db_bits + 1, a[:1], db_bits, dc_bits)


def test_cell_program_small_cell():
    """A hand-made cell: entry 0 -> 1 -> 2 -> exit 3, and a shortcut 0 -> 2 -> 3 beside: the clique is the
    cheaper of the two, and the instructions read only what they need."""
    esrc = np.array([0, 1, 2, 0], np.int64)
    edst = np.array([1, 2, 3, 2], np.int64)
    arc_edge, arc_pos, a, b, c, first, layer, out_pos, mem = microcode.cell_program(
        4, esrc, edst, np.array([0]), np.array([3]))
    cost = np.array([5, 1, 2, 9], np.int64)
    M = np.zeros(mem, np.int64)
    M[arc_pos] = cost[arc_edge]
    for x, y, z, f in zip(a, b, c, first, strict=True):
        M[z] = M[x] + M[y] if f else min(M[z], M[x] + M[y])
    assert M[out_pos[0]] == 5 + 1 + 2
    assert sorted(arc_edge.tolist()) == [0, 1, 2, 3]


def test_bad_smem_items():
    rng = np.random.default_rng(0)
    g, _ = random_road_graph(rng, 30)
    ov = mezz_overlay(g, 0)
    lg, ef, xf, cq = lowest(ov)
    with pytest.raises(ValueError, match="smem_items"):
        microcode.build_program(lg, ef, xf, cq, 1 << 15)
    # a level whose edges are cliques (not turns) cannot run microinstructions
    t = ov._plan.topo
    cb = t["cell_base"]
    with pytest.raises(ValueError, match="turns"):
        microcode.build_program(t["levels"][1], *t["level_first"][1], t["cq_first"][cb[1]:cb[2] + 1], 3072)


def test_monaco_microcode_equals_dijkstra(monkeypatch):
    monkeypatch.setattr(config, "CRP_KAHIP_MODE", "fast")
    g = gpuroute.datasets.load("monaco")
    ov = Overlay.build(g, Partition.build(g, cell_sizes=(64, 512, 4096)), mezzanine={64: (16,)})
    for metric in ("time-uturn", "distance"):
        met = gpuroute.crp.Metric.resolve(g, metric, turns=ov.turns)
        tcost = decode_turn_costs(met, ov.turns)
        want = dijkstra_cliques(ov, tcost)
        np.testing.assert_array_equal(micro_cliques(ov._plan.micro, tcost, want.size), want)
    assert_program_valid(ov._plan.micro)
