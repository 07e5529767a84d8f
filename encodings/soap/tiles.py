"""CP-SAT model for integer tile sizes of a (subgraph) statement (section 5.4.5).

Section 5.4.5 reads the optimal tiling off the solution of problem (5.8) at
X0: the tile sizes |D^t|(X0) maximize the work of a subcomputation whose
dominator set has at most X0 vertices.  For concrete S the integer version is

    maximize P(D) = Σ_s ∏ D   s.t.  F(D) = Σ_j |A_j(D)| ≤ X0,  lower_v ≤ D_v ≤ cap_v,

with the same access terms as the symbolic derivation (Lemma 5.3,
Corollary 5.1, bounded overlap).  Products are CP-SAT multiplication
constraints chained two at a time; the maxima of the bounded overlap
(section 5.5.3: a side ``max(|D^u|, |D^v|)``, a union's largest part) are
CP-SAT max constraints, so no case split is needed here.  ``min_work`` (the
work of the best rounding of the continuous optimum) is a lower bound on the
objective, so the answer is never worse than rounding.  The solver-free
re-check of a tile is :mod:`meshplan.models.soap.tile_check`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshplan.encodings.core.base import Encoded, var_name
from meshplan.models.core.errors import ModelError
from meshplan.models.soap.sdg import SubProblem

__all__ = ["encode_tiles", "TilesInfo"]

_MAX = 2 ** 61


@dataclass(frozen=True, slots=True)
class TilesInfo:
    """The decode information of :func:`encode_tiles` (its ``Encoded.meta``): the budget ``X0`` the
    model was built for and the tile classes in variable order."""

    budget: int
    classes: tuple[str, ...]


def encode_tiles(problem: SubProblem, *, budget: int, lower: dict, caps: dict,
                 min_work: int = 0, max_work: int | None = None, hint: dict | None = None) -> Encoded:
    """``max P(D)  s.t.  F(D) ≤ budget`` over integer tiles, as a CP-SAT model."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    D, dom = {}, {}
    for c in problem.classes:
        lo, hi = int(lower.get(c, 1)), int(caps[c])
        if hi < lo:
            raise ModelError(f"tile {c}: cap {hi} below its lower bound {lo}")
        D[c] = m.new_int_var(lo, hi, var_name("D", c))
        dom[c] = (lo, hi)
    counter = [0]

    def fresh(lo: int, hi: int, tag: str):
        counter[0] += 1
        if hi > _MAX or lo < -_MAX:
            raise ModelError("tile products exceed 2^61; give smaller sizes or caps")
        return m.new_int_var(lo, hi, var_name(tag, counter[0]))

    def product(factors):
        """A variable equal to the product of (var, lo, hi) factors."""
        if not factors:
            return (1, 1, 1)
        cur = factors[0]
        for f in factors[1:]:
            cands = [cur[1] * f[1], cur[1] * f[2], cur[2] * f[1], cur[2] * f[2]]
            v = fresh(min(cands), max(cands), "prod")
            m.add_multiplication_equality(v, [cur[0], f[0]])
            cur = (v, min(cands), max(cands))
        return cur

    def maximum(items):
        """A variable equal to the max of (var or int, lo, hi) items."""
        if len(items) == 1:
            return items[0]
        lo, hi = max(i[1] for i in items), max(i[2] for i in items)
        v = fresh(lo, hi, "max")
        m.add_max_equality(v, [i[0] for i in items])
        return (v, lo, hi)

    def affine(item, scale: int = 1, shift: int = 0):
        """``scale·x − shift`` of a (var or int, lo, hi) item, as such an item."""
        x, lo, hi = item
        if scale == 1 and shift == 0:
            return item
        lo, hi = sorted((scale * lo - shift, scale * hi - shift))
        if isinstance(x, int):
            return (scale * x - shift, lo, hi)
        v = fresh(lo, hi, "aff")
        m.add(v == scale * x - shift)
        return (v, lo, hi)

    def box(dims, extra=(), shift=None):
        """∏ sides (each side minus its offset count with ``shift``) as (var or int, lo, hi)."""
        facs = [affine(maximum([(D[v], dom[v][0], dom[v][1]) for v in d]) if d else (1, 1, 1),
                       shift=shift[n] if shift is not None else 0) for n, d in enumerate(dims)]
        for ver, tv in extra:
            pv = product([(D[v], dom[v][0], dom[v][1]) for v in ver])
            facs.append(affine(pv, shift=tv if shift is not None else 0))
        const = math.prod(f[0] for f in facs if isinstance(f[0], int))
        return affine(product([f for f in facs if not isinstance(f[0], int)]), scale=const)

    F_terms = []  # (var or int, integer coefficient)
    for t in problem.terms:
        if t.kind == "union":
            F_terms.append((maximum([box(part) for part in t.parts])[0], 1))
        elif t.kind == "pair":   # a box tile's rows of a triangular pair: its two boxes (≥ the pair term)
            F_terms += [(box(part)[0], 1) for part in t.parts]
        elif t.kind == "inout":
            F_terms.append((box(t.dims, [(t.version, t.t_version)])[0], 1))
            F_terms.append((box(t.dims, [(t.version, t.t_version)], shift=t.t)[0], -1))
        elif any(t.t):
            F_terms.append((box(t.dims)[0], 2))
            F_terms.append((box(t.dims, shift=t.t)[0], -1))
        else:
            F_terms.append((box(t.dims)[0], 1))
    F = sum(k * v for v, k in F_terms)
    work = [product([(D[c], dom[c][0], dom[c][1]) for c in cls])[0]
            for _, cls in problem.work]
    P = sum(work)
    m.add(F <= int(budget))
    if min_work:
        m.add(P >= int(min_work))
    if max_work is not None:  # the continuous χ(X0) bounds every integer tile (helps the proof)
        m.add(P <= int(max_work))
    objective = P
    m.maximize(objective)
    if hint:
        for c, v in hint.items():
            m.add_hint(D[c], int(v))
    variables = {var_name("D", c): D[c] for c in problem.classes}

    def decode(values):
        return {c: int(values[var_name("D", c)]) for c in problem.classes}

    return Encoded("cpsat", m, variables, decode, objective, TilesInfo(int(budget), tuple(problem.classes)))
