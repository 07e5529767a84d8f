"""meshplan.models — domain objects and their semantics.

Pure Python + numpy (+ sympy for symbolic math).  No solver, no MPI: the
layering rule of DESIGN.md is enforced by ``tests/test_layering.py``.
"""
