"""`meshplan bound --schedule`: the tightness certificate in the table and in JSON, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def test_schedule_json_and_table(cli):
    code, out, err = cli("bound", str(EX / "mmm.py"), "--params", "M=16,N=16,K=16,S=64", "--schedule",
                         "--json", "--time-limit", "1")
    assert code == 0, err
    sc = json.loads(out)["schedule"]
    for key in ("S", "sizes", "lower_bound", "loads", "stores", "total", "ratio", "schedule", "tiles",
                "loop_order", "candidates", "notes"):
        assert key in sc
    assert sc["tiled"] and sc["total"] == sc["loads"] + sc["stores"]
    assert sc["lower_bound"] <= sc["total"] < sc["loop_order"]["total"]
    assert abs(sc["ratio"] - sc["total"] / sc["lower_bound"]) < 1e-9
    assert all(c["legal"] == (c["total"] is not None) for c in sc["candidates"])
    code, out, err = cli("bound", str(EX / "mmm.py"), "--params", "M=16,N=16,K=16,S=64", "--schedule",
                         "--time-limit", "1")
    assert code == 0, err
    out = " ".join(out.split())  # the answer wraps at 80 columns when piped
    assert "attained Q = " in out and "ratio" in out and "LRU replay" in out


def test_schedule_without_tiles_replays_the_loop_order_and_says_so(cli):
    code, out, err = cli("bound", "--einsum", "i->", "--params", "N_i=50,S=8", "--schedule", "--json")
    assert code == 0, err
    sc = json.loads(out)["schedule"]
    assert not sc["tiled"] and sc["schedule"] == "loop order"
    assert sc["notes"] and "loop order" in sc["notes"][0]
    assert sc["lower_bound"] <= sc["total"]


def test_schedule_needs_every_size_and_small_ones(cli):
    code, _, err = cli("bound", str(EX / "mmm.py"), "--params", "M=16,S=64", "--schedule")
    assert code == 2 and err.startswith("error: ") and "--schedule" in err and err.count("\n") == 1
    code, _, err = cli("bound", str(EX / "mmm.py"), "--params", "M=4000,N=4000,K=4000,S=64", "--schedule",
                       "--no-tiles")
    assert code == 2 and "smaller sizes" in err and err.count("\n") == 1
