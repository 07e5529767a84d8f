"""meshplan.solvers — solver backends behind one protocol, and searches.

Backends (``backend.py``) wrap CP-SAT, z3 and PuLP; searches (enumerative
synthesis, shortest paths, exhaustive references) are pure Python.
"""
