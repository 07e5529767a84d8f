"""Shared bench helpers: a table on stdout and JSON in bench/results/<area>.json."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any, Sequence

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(area: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    payload = {"area": area, "machine": platform.platform(), "python": platform.python_version(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **payload}
    path = RESULTS / f"{area}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) if k and _numeric(c) else c.ljust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.4g}"
    return str(c)


def _numeric(c: str) -> bool:
    try:
        float(c.rstrip("sx%"))
        return True
    except ValueError:
        return False
