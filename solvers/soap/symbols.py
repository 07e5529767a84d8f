"""The symbols of the SOAP derivation: X (dominator-set size) and S (fast memory)."""

import sympy as sp

__all__ = ["X", "S"]

X = sp.Symbol("X", positive=True)
S = sp.Symbol("S", positive=True)
