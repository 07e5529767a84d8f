"""``meshplan show``: a headless PNG of the placement and one panel per step."""

from __future__ import annotations

import json

import pytest

from meshplan.plots import device_positions


@pytest.fixture(scope="module")
def schedule(export_schedule):
    return export_schedule("show", "rack=1,server=2,cpu=2,gpu=4", "4,4", "1")


def test_show_writes_a_png_with_a_panel_per_step(cli, schedule, tmp_path):
    doc = json.loads(schedule.read_text())
    pl = next(i for i, p in enumerate(doc["placements"]) if len(p["programs"][0]["steps"]) == 3)
    png = tmp_path / "plan.png"
    code, out, _ = cli("show", str(schedule), "--png", str(png), "--placement", str(pl), "--json")
    assert code == 0
    assert json.loads(out) == {"png": str(png), "panels": 4, "placement": pl, "program": 0}
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.parametrize("argv,msg", [(["--placement", "9"], "out of range"), (["--program", "999"], "out of range"),
                                      (["--dpi", "5"], "--dpi")])
def test_show_bad_input(cli, schedule, tmp_path, argv, msg):
    code, _, err = cli("show", str(schedule), "--png", str(tmp_path / "x.png"), *argv)
    assert code == 2 and msg in err


def test_show_reports_an_unwritable_file(cli, schedule, tmp_path):
    code, _, err = cli("show", str(schedule), "--png", str(tmp_path / "no" / "such" / "dir.png"))
    assert code == 2 and err.startswith("error: cannot write")


@pytest.mark.parametrize("sizes", [(2, 4), (1, 2, 2, 4), (2, 2, 2), (4, 4), (3,), (2, 3, 2, 2)])
def test_device_positions_do_not_overlap_and_keep_units_together(sizes):
    pos, W, H = device_positions(sizes)
    assert len(set(pos)) == len(pos)
    for i, (x, y) in enumerate(pos):
        assert 0 <= x <= W - 1 + 1e-9 and 0 <= y <= H - 1 + 1e-9
        for (u, v) in pos[i + 1:]:
            assert abs(x - u) >= 1 or abs(y - v) >= 1  # unit squares never overlap
    # the innermost level runs left to right
    if sizes[-1] > 1:
        assert pos[1][0] > pos[0][0] and pos[1][1] == pos[0][1]
