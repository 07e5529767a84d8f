"""Scalar chains held in the array element they are stored into (models/soap/scalars.forward_scalars):
ludcmp's ``w`` becomes ``A[i, j]``, so the update gets its version of ``A`` and is bounded; the renaming
keeps every read's writing instance, the dropped ``A[i, j] = A[i, j]`` copies only contract the CDAG, and
the bound of the program stays at most the exhaustive optimum of its own (uncontracted) CDAG.  Then
(models/soap/expand.split_triangles) ludcmp's L part (``j < i``) and U part are two arrays."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy as sp

from meshplan.models.loops.program import sym
from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.expand import split_triangles
from meshplan.models.soap.scalars import forward_scalars, split_scalars
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.pebbling import cdag, optimal_io

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

SOLVE = """
def f(N):
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= L[i, j] * y[j]
        y[i] = w
"""

DOOLITTLE = """
def f(N):
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
"""

# the store reads the element's old value too: held in C[i, j], the chain would overwrite it first
SYMM_LIKE = """
def f(N):
    for i in range(N):
        for j in range(N):
            t = 0.0
            for k in range(i):
                t += B[k, j] * A[i, k]
            C[i, j] = C[i, j] + t
"""

# k reaches j: the update would read the partial sum where the original reads the old A[i, j]
SELF_READ = """
def f(N):
    for i in range(N):
        for j in range(N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
"""


def _forward(src: str):
    (p,) = parse_source(src)
    return p, *forward_scalars(split_scalars(p)[0])


def test_ludcmp_update_is_held_in_A_and_bounded():
    (p,) = parse_file(str(EX / "ludcmp.py"))
    q, notes = forward_scalars(split_scalars(p)[0])
    assert not any(a.startswith("w") for a in q.arrays)
    assert sum("stored into A[" in n for n in notes) == 2
    # the U update reads the element it accumulates into: an in-place update of A
    upd = [st for st in q.statements if st.op == "-=" and st.output.array == "A"]
    assert len(upd) == 2 and all(st.output in st.inputs for st in upd)
    res = analyze(p)
    assert not any("no access bounds their work" in n for n in res.notes)
    N = sym("N")
    coeff = sp.simplify(res.leading * sp.sqrt(S) / N ** 3)
    assert not coeff.free_symbols and coeff >= sp.Rational(1, 3)    # was N³/(6√S)
    assert any("two arrays A_lower, A_upper" in n for n in res.notes)


def test_the_triangles_are_split_only_where_every_access_keeps_its_side():
    q, notes = split_triangles(forward_scalars(split_scalars(parse_source(DOOLITTLE)[0])[0])[0])
    assert notes and {"A_lower", "A_upper"} <= set(q.arrays)
    upd = [st for st in q.statements if st.op == "-="]    # L update reads L and U, U update likewise
    assert [st.output.array for st in upd] == ["A_lower", "A_upper"]
    assert all({a.array for a in st.inputs} == {"A_lower", "A_upper"} for st in upd)
    (lu,) = parse_file(str(EX / "lu.py"))      # the trailing update A[i, j] spans both sides
    assert split_triangles(lu) == (lu, ())


@pytest.mark.parametrize("src", [SYMM_LIKE, SELF_READ])
def test_a_renaming_that_changes_the_data_flow_is_not_made(src):
    p, q, notes = _forward(src)
    assert not notes and any(not st.output.index for st in q.statements)


def test_the_triangular_solve_drops_its_copy_back():
    p, q, notes = _forward(SOLVE)
    assert [st.output.array for st in q.statements] == ["y", "y"]
    assert "1 copy statement" in notes[0]


@pytest.mark.parametrize("src, n", [(SOLVE, 1), (SOLVE, 2), (DOOLITTLE, 1), (DOOLITTLE, 2)])
def test_the_contraction_and_the_bound_are_at_most_the_original_optimum(src, n):
    """Dropping the copies contracts vertices with one predecessor: the optimum cannot grow; and the bound,
    derived from the forwarded program, is at most the exhaustive optimum of the original CDAG."""
    p, q, _ = _forward(src)
    values = {"N": n}
    g = cdag(p, values)
    memory = max(bin(x).count("1") + 1 for x in g.preds)
    best = optimal_io(g, memory)
    assert optimal_io(cdag(q, values), memory) <= best
    assert analyze(p).evaluate({**values, "S": memory}) <= best + 1e-9
