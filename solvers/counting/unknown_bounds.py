"""Bounds of the unknown loop counts ``u_k`` of loops outside the affine class, as a user gives them
(thesis section 2.5.1): ``"u1=0..100,u2=1..n"``."""

from __future__ import annotations

import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.solvers.counting.analyze import param_symbol

__all__ = ["parse_bounds"]


def parse_bounds(text: str) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """``"u1=0..100,u2=1..n"`` -> ``{"u1": (0, 100), "u2": (1, n)}`` (affine bounds of section 2.5.1)."""
    out: dict = {}
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        name, eq, rng = part.partition("=")
        lo, dots, hi = rng.partition("..")
        if not eq or not dots or not name.isidentifier() or not lo or not hi:
            raise ModelError(f"bounds entry {part!r} is not NAME=LO..HI (e.g. u1=0..100)", param="bounds")
        try:
            lo_e, hi_e = (sp.sympify(x, locals={"n": param_symbol("n")}) for x in (lo, hi))
        except (sp.SympifyError, SyntaxError, TypeError) as err:
            raise ModelError(f"bounds {name}: cannot read {rng!r} as LO..HI", param="bounds") from err
        rep = {s: param_symbol(s.name) for e in (lo_e, hi_e) for s in e.free_symbols}
        lo_e, hi_e = lo_e.xreplace(rep), hi_e.xreplace(rep)
        if (lo_e.is_number and lo_e < 0) or (hi_e.is_number and hi_e < 0):
            raise ModelError(f"bounds {name}={rng}: a loop count is not negative; give 0 or more", param="bounds")
        if (hi_e - lo_e).is_number and hi_e - lo_e < 0:
            raise ModelError(f"bounds {name}={rng}: the lower bound is above the upper one; write {name}=LO..HI "
                             f"with LO <= HI", param="bounds")
        out[name] = (lo_e, hi_e)
    return out
