"""Symbolic helpers shared by the SOAP model and its solver."""

from __future__ import annotations

import contextlib
import functools
import sys
import types

import sympy as sp

__all__ = ["simplified"]


@functools.lru_cache(maxsize=8192)
def simplified(expr: sp.Expr) -> sp.Expr:
    """``sympy.simplify(expr)``, once per distinct expression: the derivation simplifies the same
    offsets, intensities and tile sizes many times over (mlp3: 354 calls, 13 distinct), and
    ``simplify`` is a pure function of its argument."""
    with _units_unloaded():
        return sp.simplify(expr)


_UNITS = "sympy.physics.units"


@contextlib.contextmanager
def _units_unloaded():
    """``sympy.simplify`` imports ``sympy.physics.units`` only to ask whether the expression holds a unit
    ``Quantity`` — an import of about 0.1 s of CPU (a third of sympy's own), paid by every ``meshplan
    bound``.  While that module is not loaded no ``Quantity`` exists, so no expression holds one: for the
    call, a stand-in module whose ``Quantity`` nothing is an instance of gives ``simplify`` the same answer
    (and the same result) without the import.  Once the real module is loaded it is used as is."""
    if _UNITS in sys.modules:
        yield
        return
    stub = types.ModuleType(_UNITS, "stand-in while sympy.physics.units is not loaded (models/soap/symbolic.py)")
    stub.Quantity = _Absent
    sys.modules[_UNITS] = stub
    try:
        yield
    finally:
        if sys.modules.get(_UNITS) is stub:
            del sys.modules[_UNITS]


class _Absent(sp.Basic):
    """The stand-in ``Quantity``: a sympy class with no instance in any expression."""
