"""``meshplan export --format jax``: every program of a small schedule exports to a standalone JAX program
(no meshplan import) whose ``psum`` inside ``shard_map`` equals ``jax.lax.psum`` (and numpy's sum) over every
reduction group on 8 fake CPU devices; a program with one collective removed is caught by its own check."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("jax")

# runs several exported programs in ONE process (jax starts once): each file's main() sets XLA_FLAGS before
# the first `import jax`, so the first one decides the fake device count for all (they all need 8)
_DRIVER = r"""
import contextlib, io, json, runpy, sys
out = {}
for path in sys.argv[1:]:
    ns = runpy.run_path(path, run_name="exported")
    sys.argv = [path, "4096"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            ns["main"]()
            code = 0
        except SystemExit as e:
            code = e.code
    out[path] = [code, buf.getvalue().strip().splitlines()[-1]]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_exported_jax_programs_equal_lax_psum(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "meshplan", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=tmp_path, timeout=600)
    out = run("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
              "--max-size", "2", "--export", "s.json")
    assert out.returncode == 0, out.stderr
    sched = json.loads((tmp_path / "s.json").read_text())
    counts = [len(pl["programs"]) for pl in sched["placements"]]
    assert len(counts) == 2 and all(counts)
    files = []
    for i, n in enumerate(counts):
        for j in range(n):
            name = f"r{i}_{j}.py"
            out = run("export", "s.json", "--format", "jax", "--placement", str(i), "--program", str(j), "-o", name)
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == f"wrote {name}; run it with: python {name}"
            text = (tmp_path / name).read_text()
            assert "import meshplan" not in text and "from meshplan" not in text   # standalone
            files.append(name)
    # the docs/export.md example, as printed: plan.json of the full search, placement 1, program 1
    out = run("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1", "--export",
              "plan.json")
    assert out.returncode == 0, out.stderr
    out = run("export", "plan.json", "--format", "jax", "--placement", "1", "--program", "1", "-o", "reduce_jax.py")
    assert out.returncode == 0 and out.stdout.strip() == "wrote reduce_jax.py; run it with: python reduce_jax.py"
    files.append("reduce_jax.py")
    # the check must be able to fail: the same program with its AllReduce/Reduce collectives removed
    broken = (tmp_path / "r0_0.py").read_text().replace("got = jax.lax.psum(mine, axes)\n", "got = mine\n")
    assert broken != (tmp_path / "r0_0.py").read_text()
    (tmp_path / "broken.py").write_text(broken)
    res = subprocess.run([sys.executable, "-c", _DRIVER, *files, "broken.py"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for name in files:
        code, line = got[name]
        doc = json.loads(line)
        assert code == 0 and doc["verified"] is True and doc["devices"] == 8 and doc["bad_devices"] == [], name
    code, line = got["broken.py"]
    assert code == 1 and json.loads(line)["verified"] is False
