"""``gpuroute customize --metric PROFILE.json``: a profile whose numbers are out of range is refused in
one line naming the file, the field and the value (issue 18: ``"uturn": 1e300`` printed "Python int too
large to convert to C long")."""
from __future__ import annotations

import json

import pytest

from gpuroute.cli.main import main
from gpuroute.crp import Profile


@pytest.fixture(scope="module")
def overlay_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("crp") / "monaco.crp"
    assert main(["partition", "monaco", "-o", str(d), "--cell-sizes", "64,1024", "--json"]) == 0
    return d


def _one_line(capsys):
    """The one error line on stderr (progress lines of the stages aside)."""
    out, err = capsys.readouterr()
    lines = [x for x in err.strip().splitlines() if "error:" in x]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("profile", "field", "value"), [
    ({"speeds_kmh": {"default": 50}, "turn_penalties_s": {"uturn": 1e300}}, "uturn", "1e+300"),
    ({"speeds_kmh": {"default": 50}, "turn_penalties_s": {"left": 1e308}}, "left", "1e+308"),
    ({"speeds_kmh": {"default": 50}, "turn_penalties_s": {"right": 2 ** 64}}, "right", str(2 ** 64)),
    ({"speeds_kmh": {"default": 1e-300}}, "default", "1e-300"),
    ({"speeds_kmh": {"default": 50, "residential": 1e-12}}, "residential", "1e-12"),
    # slow enough for a long arc only: found when the graph's arcs are priced
    ({"speeds_kmh": {"default": 50, "residential": 1e-6}}, "residential", "1e-06"),
])
def test_out_of_range_profile_values_name_file_field_and_value(overlay_dir, tmp_path, capsys, profile, field, value):
    path = tmp_path / "bad_profile.json"
    path.write_text(json.dumps(profile))
    capsys.readouterr()
    rc = main(["customize", str(overlay_dir), "--metric", str(path)])
    line = _one_line(capsys)
    assert rc == 2, line
    for needle in (str(path), field, value):
        assert needle in line, (needle, line)
    assert "C long" not in line


def test_profile_limits_in_the_library():
    with pytest.raises(ValueError, match=r"turn_penalties_s.*uturn.*1e\+300"):
        Profile({"default": 50}, {"uturn": 1e300})
    p = Profile({"default": 50}, {"uturn": 100.0})  # a sane profile stays accepted
    assert p.penalties_ds().tolist()[-1] == 1000
