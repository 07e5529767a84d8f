"""``meshplan count``: JSON fields, --verify, --bounds, messages for loops outside the class, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "loops" / "counting"

TREE = """
def tree_reduction(n, p, id):
    for i in range(id * n // p, min((id + 1) * n // p, n)):
        s[id] += a[i]
    i = 1
    while i < p:
        combine_partial_sums(s)
        i *= 2
"""


@pytest.fixture
def tree_file(tmp_path):
    f = tmp_path / "tree.py"
    f.write_text(TREE)
    return f


def test_json_fields_and_values(cli, tree_file):
    code, out, err = cli("count", tree_file, "--params", "n=1000,p=16", "--json")
    assert code == 0, err
    js = json.loads(out)
    assert js["iterations"] == {"S1": "ceiling(n/p)", "S2": "ceiling(log(p)/log(2))",
                                "total": "ceiling(n/p) + ceiling(log(p)/log(2))"}
    assert js["work"] == "n" and js["depth"] == "oo" and js["available_parallelism"] == "n"
    assert js["exact"] is True and js["bounds"] == {}
    assert js["values"]["total"] == 63 + 4
    assert js["values"]["efficiency"] == pytest.approx(1000 / (16 * 67))
    assert any("not work-conserving" in n for n in js["notes"])


def test_verify_and_table(cli, tree_file):
    code, out, err = cli("count", tree_file, "--params", "n=100,p=7", "--verify")
    assert code == 0, err
    assert "verification" in out and "ok" in out and "W = N(p=1)" in out


def test_example_with_unknown_loops_and_bounds(cli):
    code, out, err = cli("count", EXAMPLES / "md_cells.py", "--bounds", "u1=0..40,u2=0..40",
                         "--params", "c=100,steps=3,p=8,u1=5,u2=6", "--verify", "--json")
    assert code == 0, err
    js = json.loads(out)
    assert js["iterations"]["pair"] == "27*steps*u1*u2*ceiling(c/p)"
    assert js["bounds"]["pair"] == {"lower": "0", "upper": "43200*steps*ceiling(c/p)"}
    assert any("line 10" in n and "natoms[cell]" in n and "u1" in n for n in js["notes"])
    assert js["verification"]["ok"]


def test_bsa_bounds_reported(cli, tmp_path):
    f = tmp_path / "multi.py"
    f.write_text("def f(n, p, m):\n    x = 1\n    while x < n / p + 1:\n        z = x\n        while z < m:\n"
                 "            S2()\n            z = z + x\n        x = 2 * x\n")
    code, out, err = cli("count", f, "--params", "n=63,p=1,m=100", "--verify", "--json")
    assert code == 0, err
    js = json.loads(out)
    assert js["exact"] is False and js["iterations"]["total"] is None
    lo, hi = js["values"]["total_bounds"]
    assert lo <= js["verification"]["rows"][-1]["executed"] <= hi


@pytest.mark.parametrize("text, msg", [
    ("def f(n):\n    for i in range(n)\n        A[i] = 1\n", "not valid Python"),
    ("x = 1\n", "no function"),
    ("def f(n):\n    for i in range(n):\n        i = i + 1\n", "for-loop variable i"),
])
def test_malformed_input_one_error_line(cli, tmp_path, text, msg):
    f = tmp_path / "bad.py"
    f.write_text(text)
    code, out, err = cli("count", f)
    assert code == 2
    assert err.startswith("error:") and msg in err and err.count("\n") == 1


@pytest.mark.parametrize("args, msg", [
    (("--params", "q=3"), "not a parameter"),
    (("--params", "n=x"), "must be an integer"),
    (("--bounds", "u1=3"), "NAME=LO..HI"),
    (("--verify",), "--verify runs the program"),
    (("--function", "nope"), "no function 'nope'"),
])
def test_bad_flags(cli, tree_file, args, msg):
    code, out, err = cli("count", tree_file, *args)
    assert code == 2 and err.startswith("error:") and msg in err


def test_several_functions_in_one_file(cli, tmp_path):
    f = tmp_path / "two.py"
    f.write_text("def a(n):\n    for i in range(n):\n        S()\n\n\ndef b(n):\n    for i in range(n):\n"
                 "        for j in range(i):\n            S()\n")
    code, out, err = cli("count", f, "--json")
    assert code == 0, err
    js = json.loads(out)
    assert [x["iterations"]["total"] for x in js["functions"]] == ["n", "(n**2 - n)/2"]  # printed from isl
