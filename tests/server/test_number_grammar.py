"""The server's number grammar: the same language as the reference pattern of OSRM's numbers, written
without nested quantifiers over the same digits (the reference backtracks quadratically on a long run of
digits that does not match: a 64 KiB URL of digits cost tens of seconds of CPU)."""
import random
import re

from gpuroute.server import app

#: The reference (OSRM's grammar, ASCII digits), ambiguous where a run of digits may split two ways.
REFERENCE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def test_same_language_as_the_reference():
    rng = random.Random(0)
    alpha = "0123456789.+-eEx"
    for _ in range(50_000):
        t = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 9)))
        assert bool(REFERENCE.fullmatch(t)) == bool(app.FLOAT.fullmatch(t)), t


def test_no_ambiguous_digit_runs():
    """No ``[0-9]+`` directly followed (through an optional part) by another unbounded ``[0-9]`` run."""
    assert r"[0-9]+\.?[0-9]*" not in app.FLOAT.pattern
    assert app.FLOAT.fullmatch("1" * 5000 + "x") is None and app.FLOAT.fullmatch("1" * 5000 + ".5e-3")
