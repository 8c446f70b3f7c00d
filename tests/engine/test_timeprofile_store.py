"""A time profile stored in a dataset directory (issue 22): ``store_profile`` / ``gpuroute timeprofile DIR FILE``
writes ``DIR/time_profile.csv`` after validating the profile fully, ``Engine.open(DIR)`` (hence ``gpuroute serve
DIR``) loads it, ``time_profile=`` / ``--time-profile`` overrides it.

Oracle: the answers with the profile loaded at open time from its own file (``Engine.open(DIR,
time_profile=FILE)``, what ``serve --time-profile FILE`` does) -- the stored one must answer every ``depart_at``
alike; a refused file leaves the directory byte for byte as it was."""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import textwrap

import numpy as np
import pytest

pytest.importorskip("osmium")

from gpuroute.cli.main import main  # noqa: E402
from gpuroute.engine import Engine  # noqa: E402
from gpuroute.engine.timeslots import (  # noqa: E402
    STORED,
    TimeProfile,
    TimeProfileError,
    remove_stored_profile,
    store_profile,
    stored_profile,
)

RUSH = """\
# timezone: Europe/Monaco
# slot_minutes: 15
# valid_from: 2026-01-01
day,start,end,road_class,way_id,arc,speed_kmh,factor
weekday,07:00,09:30,primary,,,12,
weekday,07:00,09:30,secondary,,,,2.5
thu,08:00,08:15,primary,,,6,
weekend,00:00,24:00,primary,,,30,
all,17:00,19:00,residential,,,,3
"""
SLOW = """\
# timezone: UTC
day,start,end,road_class,factor
all,00:00,24:00,residential,4
all,00:00,24:00,tertiary,4
"""
DEPARTURES = ("2026-11-26T08:05", "2026-11-26T07:30+01:00", "2026-11-28T12:00", "2026-11-29T17:30",
              "2026-11-26T03:00")


@pytest.fixture
def ds(monaco_overlay_dir, tmp_path):
    """A private copy of the shared Monaco dataset (storing a profile changes the directory)."""
    d = tmp_path / "monaco"
    shutil.copytree(monaco_overlay_dir, d, ignore=shutil.ignore_patterns("traffic.npz", STORED))
    return d


def _write(tmp_path, text, name):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _pairs(e, k=4, seed=22):
    s = e.segments
    rng = np.random.default_rng(seed)
    ok = np.flatnonzero(s.length_m >= 5.0)
    pick = rng.choice(ok, 2 * k)
    f = rng.uniform(0.2, 0.8, 2 * k)
    lon = s.lon_u[pick] + f * (s.lon_v[pick] - s.lon_u[pick])
    lat = s.lat_u[pick] + f * (s.lat_v[pick] - s.lat_u[pick])
    return list(zip(lon.tolist(), lat.tolist(), strict=True))


def _answers(e, pts):
    out = []
    for when in DEPARTURES:
        for a, b in zip(pts[0::2], pts[1::2], strict=True):
            r = e.route([a, b], depart_at=when, overview="false")["routes"][0]
            out.append((r["duration"], r["distance"], r["weight"]))
        out.append(e.table(pts, depart_at=when)["durations"])
    return out


def _snapshot(d):
    """Every file of ``d`` with its SHA-256 (temporary siblings included)."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def test_stored_profile_answers_as_the_serve_time_one(ds, tmp_path):
    rush = _write(tmp_path, RUSH, "rush.csv")
    info = store_profile(ds, rush)
    assert info["file"] == str(ds / STORED) and stored_profile(ds) == str(ds / STORED)
    assert (ds / STORED).read_bytes() == rush.read_bytes()  # a CSV is stored as it is (its line numbers too)
    stored = Engine.open(ds)
    assert stored.info["time_profile"]["file"] == str(ds / STORED)
    pts = _pairs(stored)
    plain = Engine.open(ds, time_profile=False)
    assert plain.info["time_profile"] is None  # False: not even the stored one
    served = Engine.open(ds, time_profile=rush)  # what serve --time-profile FILE loads
    assert served.info["time_profile"]["file"] == str(rush)
    want = _answers(served, pts)
    assert _answers(stored, pts) == want
    plain.set_time_profile(_write(tmp_path, "# timezone: UTC\nday,start,end,arc,factor\nall,00:00,24:00,0,1\n",
                                  "flat.csv"))
    assert _answers(plain, pts) != want  # the rush slots change these answers: the equality above means something


def test_explicit_profile_overrides_the_stored_one(ds, tmp_path):
    store_profile(ds, _write(tmp_path, RUSH, "rush.csv"))
    slow = _write(tmp_path, SLOW, "slow.csv")
    e = Engine.open(ds, time_profile=slow)
    assert e.info["time_profile"]["file"] == str(slow)
    pts = _pairs(e, k=3)
    got = _answers(e, pts)
    only = Engine.open(ds, time_profile=False)
    only.set_time_profile(slow)
    assert got == _answers(only, pts)
    assert got != _answers(Engine.open(ds), pts)  # the stored (rush) profile answers otherwise


def test_parquet_is_stored_as_the_same_rows(ds, tmp_path):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = TimeProfile.read(_write(tmp_path, RUSH, "rush.csv"))
    df = pd.read_csv(tmp_path / "rush.csv", comment="#", dtype=str, keep_default_na=False)
    table = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(
        {"timezone": "Europe/Monaco", "slot_minutes": "15", "valid_from": "2026-01-01"})
    pq.write_table(table, tmp_path / "rush.parquet")
    store_profile(ds, tmp_path / "rush.parquet")
    assert src.same_rows(TimeProfile.read(ds / STORED))
    pts = _pairs(Engine.open(ds), k=3)
    assert _answers(Engine.open(ds), pts) == _answers(Engine.open(ds, time_profile=tmp_path / "rush.csv"), pts)


def test_to_csv_reads_back_the_same_rows(tmp_path):
    """Every day kind, key kind, value kind, ``slot`` rows and the calendar survive :meth:`TimeProfile.to_csv`."""
    text = ("# timezone: +01:00\n# slot_minutes: 30\n# valid_from: 2026-01-01\n# valid_until: 2026-12-31\n"
            "day,slot,road_class,way_id,arc,speed_kmh,factor\nmon,3,primary,,,17.25,\nweekend,47,,123,,,0.1\n"
            "all,0,,,5,,1.3333333333333333\nweekday,10,motorway,,,99,\n")
    src = TimeProfile.read(_write(tmp_path, text, "p.csv"))
    back = TimeProfile.read(_write(tmp_path, src.to_csv(), "back.csv"))
    assert src.same_rows(back)
    assert np.array_equal(src.variant, back.variant)


@pytest.mark.parametrize("bad, words", [
    ("# timezone: Europe/Monaco\nday,start,end,road_class,speed_kmh\nweekday,07:00,09:30,nosuchclass,12\n",
     ["bad.csv:3", "nosuchclass"]),  # a key not in the graph: caught by binding, not by reading
    ("# timezone: Europe/Monaco\nday,start,end,arc,factor\nweekday,07:00,09:30,99999999,2\n", ["bad.csv:3", "arc"]),
    ("# timezone: Europe/Monaco\nday,start,end,road_class,factor\nweekday,07:00,09:30,primary,1e12\n",
     ["bad.csv", "largest cost"]),  # only a slot metric finds this one
    ("# timezone: Mars/Olympus\nday,start,end,arc,factor\nall,07:00,09:30,1,2\n", ["bad.csv:1", "timezone"]),
    ("day,start,end,arc,factor\nall,07:00,09:30,1,2\n", ["no timezone"]),
])
def test_bad_profile_leaves_the_dataset_unchanged(ds, tmp_path, bad, words):
    store_profile(ds, _write(tmp_path, RUSH, "rush.csv"))
    before = _snapshot(ds)
    with pytest.raises(TimeProfileError) as err:
        store_profile(ds, _write(tmp_path, bad, "bad.csv"))
    for w in words:
        assert w in str(err.value)
    assert _snapshot(ds) == before  # the stored profile, byte for byte, and no temporary left behind


def test_cli_timeprofile(ds, tmp_path, capsys):
    rush = _write(tmp_path, RUSH, "rush.csv")
    assert main(["timeprofile", str(ds), str(rush)]) == 0
    out, err = capsys.readouterr()
    assert str(ds / STORED) in out and (ds / STORED).read_bytes() == rush.read_bytes()
    before = _snapshot(ds)
    bad = _write(tmp_path, "# timezone: UTC\nday,start,end,arc,factor\nall,07:00,09:30,1,-2\n", "bad.csv")
    assert main(["timeprofile", str(ds), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "bad.csv:3" in err and "left as it was" in err
    assert _snapshot(ds) == before
    assert main(["timeprofile", str(ds), "--remove"]) == 0
    capsys.readouterr()
    assert stored_profile(ds) is None and not remove_stored_profile(ds)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["timeprofile", str(tmp_path), str(rush)]) == 2  # not a dataset directory
    assert "not a dataset directory" in capsys.readouterr().err


def test_build_stores_the_profile(tmp_path, capsys):
    """``gpuroute build ... --time-profile FILE``: the built directory answers ``depart_at`` as the profile loaded
    at open time; a profile that does not fit the graph fails the build and leaves the directory it would replace
    as it was; a file that does not read fails before any stage runs."""
    rush = _write(tmp_path, RUSH, "rush.csv")
    d = tmp_path / "built"
    assert main(["build", "monaco", "-o", str(d), "--cell-sizes", "64,1024", "--time-profile", str(rush)]) == 0
    capsys.readouterr()
    assert (d / STORED).read_bytes() == rush.read_bytes()
    e = Engine.open(d)
    pts = _pairs(e, k=2)
    assert _answers(e, pts) == _answers(Engine.open(d, time_profile=rush), pts)
    before = _snapshot(d)
    unknown = _write(tmp_path, "# timezone: UTC\nday,start,end,road_class,factor\nall,07:00,08:00,nosuch,2\n", "u.csv")
    assert main(["build", "monaco", "-o", str(d), "--cell-sizes", "64,1024", "--time-profile", str(unknown)]) == 2
    err = capsys.readouterr().err
    assert "u.csv:3" in err and "nosuch" in err
    assert _snapshot(d) == before and not [p for p in os.listdir(tmp_path) if p.startswith(".built")]
    unread = _write(tmp_path, "day,start,end,arc,factor\nall,07:00,08:00,1,2\n", "v.csv")
    assert main(["build", "monaco", "-o", str(d), "--time-profile", str(unread)]) == 2
    err = capsys.readouterr().err
    assert "no timezone" in err and "import ..." not in err  # refused before the first stage
    assert _snapshot(d) == before
