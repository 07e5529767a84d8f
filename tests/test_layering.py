"""The dependency rule of DESIGN.md, enforced on the source tree.

meshplan (front door) -> exec -> solvers -> encodings -> models; only
encodings/solvers import z3/ortools; only exec imports mpi4py; code
imports ``meshplan.<layer>``, never a bare layer name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["models", "encodings", "solvers", "exec"]
ORDER = {"models": 0, "encodings": 1, "solvers": 2, "exec": 3, "front": 4}
SOLVER_LIBS = {"z3", "ortools"}


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
        if target is not None and mod != "meshplan.models.core.errors" and not mod.startswith("meshplan.models"):
            if ORDER[target] > ORDER[layer]:
                problems.append(f"line {line}: {layer} imports {mod} (a higher layer)")
        if target == "front" and layer != "front":
            problems.append(f"line {line}: {layer} imports the front door {mod}")
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


# --- one home per capability (DESIGN.md, Capabilities) ---------------------------------------------

#: the one list of capability folders; a layer holds a subset of them and nothing else
CAPABILITIES = ("core", "loops", "placement", "reduction", "redistribution", "soap",
                "matmul", "factorization", "tensor", "counting")
#: folders that are not capabilities but one shared piece of a layer
LAYER_INFRA = {"solvers": {"backends"}, "exec": {"runtime", "testbed"}}


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_folder_is_a_capability_from_one_list(layer: str):
    folders = {p.parent.name for p in (ROOT / layer).glob("*/__init__.py")}
    allowed = set(CAPABILITIES) | LAYER_INFRA.get(layer, set())
    assert folders <= allowed, f"{layer}/ holds folders that are not capabilities: {sorted(folders - allowed)}"


@pytest.mark.parametrize("layer", LAYERS)
def test_no_loose_modules_in_a_layer(layer: str):
    loose = sorted(p.name for p in (ROOT / layer).glob("*.py") if p.name != "__init__.py")
    assert not loose, f"{layer}/ has modules outside a capability folder: {loose}"


COLLECTIVE_NAMES = {"AllReduce", "ReduceScatter", "AllGather", "Reduce", "Broadcast"}


def _defines_collective_names(path: Path) -> list[int]:
    """Lines that define a collection of (at least three) collective names as string literals, or branch
    on a collective name string."""
    tree = ast.parse(path.read_text(), filename=str(path))
    # `__all__` lists public names; a class may be called Broadcast (DistDL's primitives) without
    # defining collective names
    exported = {id(n) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                for n in ast.walk(node.value)}
    hits = []
    for node in ast.walk(tree):
        if id(node) in exported:
            continue
        if isinstance(node, ast.Compare):  # branching on a name: `c == "AllReduce"`, `c in (...)`
            consts = [n for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in COLLECTIVE_NAMES]
            if consts:
                hits.append(node.lineno)
            continue
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        else:
            continue
        names = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in COLLECTIVE_NAMES}
        if len(names) >= 3:
            hits.append(node.lineno)
    return hits


@pytest.mark.parametrize("layer,path", FILES, ids=[str(p.relative_to(ROOT)) for _, p in FILES])
def test_collective_names_are_defined_only_in_models_core(layer: str, path: Path):
    if path.parent == ROOT / "models" / "core":
        return
    hits = _defines_collective_names(path)
    assert not hits, (f"{path.relative_to(ROOT)} lines {hits}: collective names are defined in "
                      "meshplan.models.core.collectives; use the Collective enum")
