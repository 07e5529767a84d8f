"""``meshplan count``: bad input (a missing file, inverted or negative --bounds), Barvinok's cases in the
table and the JSON, and ``exact`` false while an unknown loop count remains."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("islpy")

TRAPEZOID = """
def trap(n, m):
    for i in range(max(0, m - n), min(n, 2 * m)):
        for j in range(max(i, m), n + m):
            A[i, j] = 0
"""

DATA = """
def f(n, a):
    for i in range(n):
        for k in range(a[i], a[i + 1]):
            A[i] = 0
"""


def test_missing_file_says_not_found(cli, tmp_path):
    code, out, err = cli("count", tmp_path / "nope.py")
    assert code == 2 and "not found" in err and err.count("\n") == 1 and err.startswith("error:")


@pytest.mark.parametrize("spec, word", [("u1=5..1", "lower bound is above"), ("u1=-1..3", "not negative")])
def test_bad_bounds_are_refused(cli, tmp_path, spec, word):
    f = tmp_path / "data.py"
    f.write_text(DATA)
    code, out, err = cli("count", f, "--bounds", spec)
    assert code == 2 and word in err and "--bounds" in err


def test_unknown_counts_are_not_exact(cli, tmp_path):
    f = tmp_path / "data.py"
    f.write_text(DATA)
    code, out, err = cli("count", f, "--json")
    js = json.loads(out)
    assert code == 0 and js["unknowns"] == ["u1"] and js["exact"] is False


def test_cases_in_table_and_json(cli, tmp_path):
    f = tmp_path / "trap.py"
    f.write_text(TRAPEZOID)
    code, out, err = cli("count", f, "--json", "--params", "n=5,m=3", "--verify")
    js = json.loads(out)
    assert code == 0 and js["exact"] and js["methods"] == {"S1": "barvinok"}
    assert js["values"]["S1"] == sum(len(range(max(i, 3), 8)) for i in range(max(0, 3 - 5), min(5, 6)))
    assert len(js["cases"]["S1"]) >= 3 and js["cases"]["S1"][-1] == {"count": "0", "when": "otherwise"}
    assert js["iterations"]["S1"].startswith("Piecewise(")
    code, out, err = cli("count", f)
    assert code == 0 and "if " in out and "otherwise" in out
