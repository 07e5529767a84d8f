"""Symbolic helpers shared by the SOAP model and its solver."""

from __future__ import annotations

import functools

import sympy as sp

__all__ = ["simplified"]


@functools.lru_cache(maxsize=8192)
def simplified(expr: sp.Expr) -> sp.Expr:
    """``sympy.simplify(expr)``, once per distinct expression: the derivation simplifies the same
    offsets, intensities and tile sizes many times over (mlp3: 354 calls, 13 distinct), and
    ``simplify`` is a pure function of its argument."""
    return sp.simplify(expr)
