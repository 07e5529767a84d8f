"""Every package folder is declared in pyproject.toml, so wheels miss nothing."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_package_is_listed():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    mapping = cfg["package-dir"]
    found = set()
    for pkg, folder in [("meshplan", "meshplan"), *[(k, v) for k, v in mapping.items()]]:
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([pkg, *rel.parts]) if rel.parts else pkg)
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_no_top_level_encodings_shadow():
    import encodings  # the standard library's

    assert Path(encodings.__file__).resolve().parent != (ROOT / "encodings").resolve()


def test_docs_and_sources_cite_papers_not_paths_outside_the_repository():
    """A user's clone has no ``../shared``: README, docs/, examples and every module cite papers by title."""
    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "examples").rglob("*.py"))]
    for layer in ("meshplan", "models", "encodings", "solvers", "exec"):
        files += sorted((root / layer).rglob("*.py"))
    bad = [str(f.relative_to(root)) for f in files if "../shared" in f.read_text() or "shared/papers" in f.read_text()]
    assert not bad, f"these cite a path outside the repository: {bad}"
