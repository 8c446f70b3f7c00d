"""benchmarks/tours_peers.py's ``--variant`` (issue 23's comparisons of SISR settings in one run): the spec is
parsed into vrp_sisr constants or refused naming the spec and the key; a variant's run sees its constants and
leaves the module as it was."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpuroute.tours import vrp_pop as pop
from gpuroute.tours import vrp_sisr as sisr

_spec = importlib.util.spec_from_file_location(
    "_bench_tours_peers", Path(__file__).parents[2] / "benchmarks" / "tours_peers.py")
tp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tp)


def test_variants_parse_into_sisr_constants():
    v = tp.parse_variants(["near:NEAR=10", "hot:t0=1.0,SISR_TF=0.006"])
    assert v == {"gpuroute-cpu-near": {"SISR_NEAR": 10},
                 "gpuroute-cpu-hot": {"SISR_T0": 1.0, "SISR_TF": 0.006}}
    assert isinstance(v["gpuroute-cpu-near"]["SISR_NEAR"], int)


def test_pop_variants_parse_into_vrp_pop_constants():
    """``POP_*`` / ``VRP_POP_*`` keys name constants of gpuroute.tours.vrp_pop (``POP_SIZE=1``: one chain)."""
    v = tp.parse_variants(["chain:POP_SIZE=1", "mix:vrp_pop_child=0.02,T0=1"])
    assert v == {"gpuroute-cpu-chain": {"VRP_POP_SIZE": 1},
                 "gpuroute-cpu-mix": {"VRP_POP_CHILD": 0.02, "SISR_T0": 1.0}}
    assert isinstance(v["gpuroute-cpu-chain"]["VRP_POP_SIZE"], int)
    with pytest.raises(ValueError, match="'POP_FOO' is not a constant"):
        tp.parse_variants(["x:POP_FOO=1"])


@pytest.mark.parametrize("spec, words", [("near", "expected NAME:KEY=VALUE"),
                                         ("x:FOO=1", "'FOO' is not a constant"),
                                         ("x:NEAR=ten", "NEAR='ten' is not a number"),
                                         ("x:NEAR", "is not a constant")])
def test_bad_variants_are_refused_by_name(spec, words):
    with pytest.raises(ValueError, match=repr(spec).replace("[", r"\[")) as e:
        tp.parse_variants([spec])
    assert words in str(e.value)


def test_a_variant_run_sees_its_constants_and_restores_them(monkeypatch):
    seen = {}

    def fake(inst, T, device, seed):
        seen.update(pen=sisr.SISR_PEN, near=sisr.SISR_NEAR, pop=pop.VRP_POP_SIZE, device=device)
        raise RuntimeError("stop")

    monkeypatch.setattr(tp, "_gpuroute", fake)
    before = (sisr.SISR_PEN, sisr.SISR_NEAR, pop.VRP_POP_SIZE)
    run = tp._variant({"SISR_PEN": 2.5, "SISR_NEAR": 7, "VRP_POP_SIZE": 1})
    with pytest.raises(RuntimeError):
        run(None, 1.0, 0)
    assert seen == {"pen": 2.5, "near": 7, "pop": 1, "device": "cpu"}
    assert (sisr.SISR_PEN, sisr.SISR_NEAR, pop.VRP_POP_SIZE) == before
