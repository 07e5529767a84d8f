"""Shared fixtures of the solver tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from meshplan.models.loops.frontend import parse_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "loops"


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


class DurbinTraces:
    """examples/loops/durbin.py parsed, and two helpers of the durbin tests on its traces."""

    def __init__(self) -> None:
        (self.program,) = parse_file(str(EXAMPLES / "durbin.py"))

    @staticmethod
    def index(tr, p) -> dict:
        """``(statement, k, inner index) → instance``."""
        names = [st.name for st in p.statements]
        inner = {st.name: st.loops[1].var for st in p.statements if len(st.loops) > 1}
        out = {}
        for i, s in enumerate(tr.stmt.tolist()):
            name = names[s]
            j = int(tr.vars[inner[name]][i]) if name in inner else None
            out[name, int(tr.vars["k"][i]), j] = i
        return out

    @staticmethod
    def fused(tr, idx, n: int) -> np.ndarray:
        """durbin's update of step ``k`` fused with the ``sum`` of step ``k + 1``: at position ``q`` the two
        ``z`` of the pair ``q, k − 1 − q`` (both read the old ``y[q]`` and ``y[k − 1 − q]``), ``y[q] = z[q]``
        and ``sum += r[k − q]·y[q]``; a recomputation-free sweep of about ``3.5k`` words per step."""
        out = [idx["S1", 1, None], idx["S2", 1, None], idx["S3", 1, 0], idx["S4", 1, None]]
        for k in range(1, n):
            more = k + 1 < n
            out += [idx["S1", k + 1, None], idx["S2", k + 1, None]] if more else []
            for q in range(k):
                m = k - 1 - q
                out += [idx["S5", k, q], idx["S5", k, m]] if q < m else [idx["S5", k, q]] if q == m else []
                out += [idx["S6", k, q]] + ([idx["S3", k + 1, q]] if more else [])
            out += [idx["S7", k, None]] + ([idx["S3", k + 1, k], idx["S4", k + 1, None]] if more else [])
        return np.array(out)


@pytest.fixture(scope="session")
def durbin():
    """:class:`DurbinTraces` (the durbin example and helpers on its traces), parsed once."""
    return DurbinTraces()
