"""The dependency rule of DESIGN.md, enforced on the source tree.

meshplan (front door) -> exec -> solvers -> encodings -> models; only
encodings/solvers import z3/ortools/pulp; only exec imports mpi4py; code
imports ``meshplan.<layer>``, never a bare layer name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["models", "encodings", "solvers", "exec"]
ORDER = {"models": 0, "encodings": 1, "solvers": 2, "exec": 3, "front": 4}
SOLVER_LIBS = {"z3", "ortools", "pulp"}


def _layer_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "meshplan":
        return None
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "front"


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _files():
    for layer in LAYERS:
        for p in sorted((ROOT / layer).rglob("*.py")):
            yield layer, p
    for p in sorted((ROOT / "meshplan").rglob("*.py")):
        yield "front", p


FILES = list(_files())


def test_there_are_files():
    assert any(layer == "models" for layer, _ in FILES)


@pytest.mark.parametrize("layer,path", FILES, ids=[str(p.relative_to(ROOT)) for _, p in FILES])
def test_layering(layer: str, path: Path):
    problems = []
    for line, mod in _imports(path):
        top = mod.split(".")[0]
        if top in LAYERS:
            problems.append(f"line {line}: bare import of {mod!r}; import meshplan.{mod}")
        if top in SOLVER_LIBS and layer not in ("encodings", "solvers"):
            problems.append(f"line {line}: {layer} imports solver library {top}")
        if top == "mpi4py" and layer != "exec":
            problems.append(f"line {line}: {layer} imports mpi4py (only exec may)")
        target = _layer_of_module(mod)
        if target is not None and mod != "meshplan.models.errors" and not mod.startswith("meshplan.models"):
            if ORDER[target] > ORDER[layer]:
                problems.append(f"line {line}: {layer} imports {mod} (a higher layer)")
        if target == "front" and layer != "front":
            problems.append(f"line {line}: {layer} imports the front door {mod}")
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)
