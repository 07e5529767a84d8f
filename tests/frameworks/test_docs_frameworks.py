"""The programs of docs/frameworks.md run as printed and print what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def _example(name: str) -> tuple[str, list[str]]:
    """The program whose first line names ``name`` and the lines of the ``prints`` block after it."""
    text = PAGE.read_text()
    m = re.search(r"```python\n(# " + re.escape(name) + r".*?)```\s*\n\s*prints[^\n]*\n\s*```\n(.*?)```", text, re.S)
    assert m, f"docs/frameworks.md has no example {name} followed by what it prints"
    return m.group(1), m.group(2).strip().splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("name,module", [("redistribute_torch.py", "torch"), ("reshard_jax.py", "jax"),
                                         ("psum_jax.py", "jax")])
def test_docs_example_runs_as_printed(tmp_path, name, module):
    pytest.importorskip(module)
    code, printed = _example(name)
    path = tmp_path / name
    path.write_text(code)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines() == printed
