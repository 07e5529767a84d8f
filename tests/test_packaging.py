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
