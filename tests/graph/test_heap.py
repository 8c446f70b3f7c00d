"""The one heap module (gpuroute.graph.heap) against a naive model: a dict of item -> key (addressable
heap) and a sorted list of pairs (lazy heap), on random operation sequences, for int and float keys, int32
and int64 items, binary and 4-ary, and positions strided as the searches keep them."""
import numpy as np
import pytest
from numba import njit

from gpuroute.graph.heap import ah_contains, ah_pop, ah_update, heap_pop, heap_push, heap_push_grow


@njit
def _lazy_run(ops, keys, items, hk, hn):
    """ops[j] 0: push (keys[j], items[j]), 1: pop; returns the popped keys, items and the final size."""
    out_k = np.empty(ops.size, hk.dtype)
    out_i = np.empty(ops.size, np.int64)
    size = 0
    n = 0
    for j in range(ops.size):
        if ops[j] == 0:
            size = heap_push(hk, hn, size, keys[j], items[j])
        elif size > 0:
            k, x, size = heap_pop(hk, hn, size)
            out_k[n] = k
            out_i[n] = x
            n += 1
    return out_k[:n], out_i[:n], size


@njit
def _grow_run(keys, items):
    hk = np.empty(1, keys.dtype)
    hn = np.empty(1, np.int32)
    size = 0
    for j in range(keys.size):
        hk, hn, size = heap_push_grow(hk, hn, size, keys[j], items[j])
    out = np.empty(size, keys.dtype)
    for j in range(out.size):
        out[j], _, size = heap_pop(hk, hn, size)
    return out


@pytest.mark.parametrize("kdt", [np.int64, np.float64])
@pytest.mark.parametrize("seed", range(4))
def test_lazy_heap_pops_in_key_order(kdt, seed):
    rng = np.random.default_rng(seed)
    m = 400
    ops = (rng.random(m) < 0.4).astype(np.int64)
    keys = rng.integers(0, 30, m).astype(kdt)  # many ties
    items = rng.integers(0, 50, m)
    hk = np.empty(m, kdt)
    hn = np.empty(m, np.int32)
    got_k, got_i, size = _lazy_run(ops, keys, items, hk, hn)
    model = []
    want = []
    for j in range(m):
        if ops[j] == 0:
            model.append((keys[j], items[j]))
        elif model:
            kmin = min(k for k, _ in model)
            want.append(kmin)
            # the popped pair is one of the pairs with the minimum key
            model.remove((got_k[len(want) - 1], got_i[len(want) - 1]))
    np.testing.assert_array_equal(got_k, np.array(want, kdt))
    assert size == len(model)


def test_heap_push_grow_doubles():
    rng = np.random.default_rng(5)
    keys = rng.random(1000)
    np.testing.assert_array_equal(_grow_run(keys, rng.integers(0, 9, 1000).astype(np.int32)), np.sort(keys))


@njit
def _ah_run(ops, keys, items, hk, hn, pos, stride, off, shift):
    """ops[j] 0: update (items[j] -> keys[j]), 1: pop, 2: membership of items[j]; returns per op the popped
    key/item (or the membership) and the size after it."""
    rk = np.zeros(ops.size, hk.dtype)
    ri = np.full(ops.size, -1, np.int64)
    rs = np.empty(ops.size, np.int64)
    size = 0
    for j in range(ops.size):
        if ops[j] == 0:
            if shift == 1:
                size = ah_update(hk, hn, size, pos, stride, off, keys[j], items[j], 1)
            else:
                size = ah_update(hk, hn, size, pos, stride, off, keys[j], items[j], 2)
        elif ops[j] == 1:
            if size > 0:
                if shift == 1:
                    rk[j], ri[j], size = ah_pop(hk, hn, size, pos, stride, off, -2, 1)
                else:
                    rk[j], ri[j], size = ah_pop(hk, hn, size, pos, stride, off, -2, 2)
        else:
            ri[j] = 1 if ah_contains(hn, size, pos, stride, off, items[j]) else 0
        rs[j] = size
    return rk, ri, rs


@pytest.mark.parametrize(("shift", "kdt", "idt", "stride", "off"),  # as ch/sequential, ch/query, crp/search use it
                         [(1, np.int64, np.int64, 1, 0), (2, np.int64, np.int32, 2, 1), (1, np.int64, np.int64, 8, 2),
                          (2, np.float64, np.int32, 1, 0)])
@pytest.mark.parametrize("seed", range(3))
def test_addressable_heap_equals_a_dict(shift, kdt, idt, stride, off, seed):
    rng = np.random.default_rng(seed)
    m, n = 600, 40
    ops = rng.choice(3, m, p=[0.55, 0.3, 0.15]).astype(np.int64)
    keys = rng.integers(0, 25, m).astype(kdt)
    items = rng.integers(0, n, m)
    hk = np.empty(n, kdt)
    hn = np.empty(n, idt)
    # stale garbage positions: membership is checked against the heap, never trusted
    pos = rng.integers(-3, n, stride * n + stride).astype(np.int64)
    rk, ri, rs = _ah_run(ops, keys, items, hk, hn, pos, stride, off, shift)
    model = {}
    popped = set()  # items whose last operation was a pop: their position is the "gone" value
    for j in range(m):
        if ops[j] == 0:
            model[int(items[j])] = keys[j]
            popped.discard(int(items[j]))
        elif ops[j] == 1 and model:
            kmin = min(model.values())
            assert rk[j] == kmin and model.get(int(ri[j])) == kmin, f"op {j}"
            del model[int(ri[j])]
            popped.add(int(ri[j]))
        elif ops[j] == 2:
            assert ri[j] == (int(items[j]) in model), f"op {j}"
        assert rs[j] == len(model), f"op {j}"
    assert popped and all(pos[stride * x + off] == -2 for x in popped)


def test_no_other_binary_heap_in_the_source():
    """Sift loops (``(i - 1) >> k``) live in graph/heap.py; the known exception is the CH witness search
    (written out: measured faster, see its docstring). The CPU emulation of the GPU many-to-many kept its own
    copy until session 22; it now runs graph/heap.py's (through crp/search.py's ih_update / ih_pop)."""
    from pathlib import Path

    import gpuroute

    root = Path(gpuroute.__file__).parent
    hits = {str(p.relative_to(root)) for p in root.rglob("*.py") if "(i - 1) >> " in p.read_text(encoding="utf-8")}
    assert hits <= {"graph/heap.py", "ch/sequential.py"}, hits
