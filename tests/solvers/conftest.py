"""Shared fixtures of the solver tests."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st


@st.composite
def _soap_programs(draw):
    """Random affine loop nests: 1-3 statements, offsets, triangular bounds, in-place updates."""
    vs = "ijk"
    lines = ["def gen(N, M):"]
    # each array has one number of subscripts throughout the program (the frontend rejects A[i] beside A[i, j])
    rank = {a: draw(st.integers(1, 2)) for a in "ABCXY"}
    for _ in range(draw(st.integers(1, 3))):
        depth = draw(st.integers(1, 3))
        for d in range(depth):
            lo = draw(st.sampled_from(["0", "1"] + [f"{u} + 1" for u in vs[:d]]))
            hi = draw(st.sampled_from(["N", "M"] + [f"{u} + 1" for u in vs[:d]]))
            lines.append("    " * (d + 1) + f"for {vs[d]} in range({lo}, {hi}):")
        out_arr = draw(st.sampled_from([a for a in "ABC" if rank[a] <= depth] or ["Z"]))
        out = draw(st.lists(st.sampled_from(vs[:depth]), min_size=rank.get(out_arr, 1),
                            max_size=rank.get(out_arr, 1), unique=True))
        reads = []
        for _ in range(draw(st.integers(0, 3))):
            arr = draw(st.sampled_from("ABCXY"))
            dims = draw(st.lists(st.sampled_from(vs[:depth]), min_size=rank[arr], max_size=rank[arr]))
            off = draw(st.lists(st.integers(-1, 1), min_size=len(dims), max_size=len(dims)))
            reads.append(f"{arr}[{', '.join(f'{v} + {o}' if o else v for v, o in zip(dims, off))}]")
        op = draw(st.sampled_from(["=", "+="]))
        lines.append("    " * (depth + 1) + f"{out_arr}[{', '.join(out)}] {op} {' * '.join(reads) or '1.0'}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def soap_programs():
    """A hypothesis strategy of SOAP program sources (draw it with ``st.data()``)."""
    return _soap_programs()
