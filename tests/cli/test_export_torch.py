"""``meshplan export --format torch``: the exported program runs as printed in docs/export.md (8 gloo
processes) and its result equals torch's own all_reduce over every reduction group."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_exported_torch_program_runs_and_verifies(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "meshplan", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=tmp_path, timeout=600)
    out = run("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1", "--export",
              "plan.json")
    assert out.returncode == 0, out.stderr
    out = run("export", "plan.json", "--format", "torch", "--placement", "1", "--program", "1", "-o",
              "reduce_torch.py")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "wrote reduce_torch.py; run it with: python reduce_torch.py"
    text = (tmp_path / "reduce_torch.py").read_text()
    assert "import meshplan" not in text and "from mpi4py" not in text and "import mpi4py" not in text
    res = subprocess.run([sys.executable, "reduce_torch.py", "65536"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["verified"] is True and doc["ranks"] == 8 and doc["bad_ranks"] == []
