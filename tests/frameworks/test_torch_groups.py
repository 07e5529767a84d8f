"""meshplan.torch's caches belong to one default process group: after ``destroy_process_group`` and a new
``init_process_group`` the plans run on the new group's processes (none of the old groups is reused, even where
the new group's ``id`` is the old one's), and ``release`` drops every cached group."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_new_default_group_gets_new_groups_and_release_drops_them():
    script = Path(__file__).with_name("torch_reinit_program.py")
    run = subprocess.run([sys.executable, str(script), str(_port()), str(_port())], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    rounds = [x for x in lines if "round" in x]
    assert [r["round"] for r in rounds] == [0, 1]
    assert all(r["equal"] for r in rounds), rounds
    assert all(r["groups"] >= 1 for r in rounds), rounds
    assert not any(r["stale"] for r in rounds), rounds
    assert lines[-1] == {"released": 0}
