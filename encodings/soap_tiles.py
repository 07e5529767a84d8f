"""CP-SAT model for integer tile sizes of a (subgraph) statement (section 5.4.5).

Section 5.4.5 reads the optimal tiling off the solution of problem (5.8) at
X0: the tile sizes |D^t|(X0) maximize the work of a subcomputation whose
dominator set has at most X0 vertices.  For concrete S the integer version is

    maximize P(D) = Σ_s ∏ D   s.t.  F(D) = Σ_j |A_j(D)| ≤ X0,  lower_v ≤ D_v ≤ cap_v,

with the same access terms as the symbolic derivation (Lemma 5.3,
Corollary 5.1, bounded overlap).  Products are CP-SAT multiplication
constraints chained two at a time; ``L`` clears the denominators of the mean
terms (``L·F`` is integral).  ``min_work`` (the work of the best rounding of
the continuous optimum) is a lower bound on the objective, so the answer is
never worse than rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

from meshplan.encodings.base import Encoded, var_name
from meshplan.models.errors import ModelError
from meshplan.models.soap.sdg import SubProblem, Term

__all__ = ["encode_tiles", "scale_of", "term_value", "work_value"]

_MAX = 2 ** 61


def scale_of(problem: SubProblem) -> int:
    """``L``: the lcm of the denominators of the access terms (means over 2+ parts/variables)."""
    L = 1
    for t in problem.terms:
        parts = t.parts if t.kind == "union" else (t.dims,)
        den = 1
        for part in parts:
            den = math.lcm(den, math.prod(len(d) for d in part if len(d) > 1))
        if t.kind == "union":
            den *= len(t.parts)
        L = math.lcm(L, den)
    return L


def _side(d, D) -> Fraction:
    if not d:
        return Fraction(1)
    return Fraction(sum(D[v] for v in d), len(d))


def term_value(term: Term, D: dict) -> Fraction:
    """The access-size lower bound of ``term`` at integer tiles ``D`` (exact, solver-free)."""
    if term.kind == "union":
        tot = Fraction(0)
        for part in term.parts:
            p = Fraction(1)
            for d in part:
                p *= _side(d, D)
            tot += p
        return tot / len(term.parts)
    s = [_side(d, D) for d in term.dims]
    t = list(term.t)
    if term.kind == "inout":
        s.append(Fraction(math.prod(D[v] for v in term.version)))
        t.append(term.t_version)
        return math.prod(s) - math.prod(a - b for a, b in zip(s, t))
    if not any(t):
        return math.prod(s)
    return 2 * math.prod(s) - math.prod(a - b for a, b in zip(s, t))


def work_value(problem: SubProblem, D: dict) -> int:
    return sum(math.prod(D[c] for c in cls) for _, cls in problem.work)


def encode_tiles(problem: SubProblem, *, budget: int, lower: dict, caps: dict,
                 min_work: int = 0, max_work: int | None = None, hint: dict | None = None) -> Encoded:
    """``max P(D)  s.t.  F(D) ≤ budget`` over integer tiles, as a CP-SAT model."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    L = scale_of(problem)
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

    def scaled_side(d, k):
        """k·side(d) as (expr, lo, hi) with k·mean integral (k a multiple of len(d))."""
        if not d:
            return (k, k, k)
        if len(d) == 1:
            v = d[0]
            return (k * D[v], k * dom[v][0], k * dom[v][1])
        f = k // len(d)
        lo = f * sum(dom[v][0] for v in d)
        hi = f * sum(dom[v][1] for v in d)
        return (f * sum(D[v] for v in d), lo, hi)

    def as_var(e):
        expr, lo, hi = e
        if isinstance(expr, int):
            return (expr, lo, hi)
        v = fresh(lo, hi, "aff")
        m.add(v == expr)
        return (v, lo, hi)

    def box(dims, extra=(), shift=None):
        """∏ sides (scaled: first side by L when a mean needs it), optionally minus t."""
        facs = []
        for n, d in enumerate(dims):
            k = len(d) if len(d) > 1 else 1
            expr, lo, hi = scaled_side(d, k)
            if shift is not None:
                expr, lo, hi = expr - k * shift[n], lo - k * shift[n], hi - k * shift[n]
            facs.append((as_var((expr, lo, hi)), k))
        for ver, tv in extra:
            pv = product([(D[v], dom[v][0], dom[v][1]) for v in ver]) if ver else (1, 1, 1)
            if shift is not None and tv:
                pv = as_var((pv[0] - tv, pv[1] - tv, pv[2] - tv))
            facs.append((pv, 1))
        denom = math.prod(k for _, k in facs)
        prod = product([f for f, _ in facs if not isinstance(f[0], int)])
        const = math.prod(f[0] for f, _ in facs if isinstance(f[0], int))
        return prod, const, denom

    F_terms = []  # (var or int, coefficient as Fraction)

    def add(prod, const, denom, sign):
        F_terms.append((prod[0], Fraction(sign * const, denom)))

    for t in problem.terms:
        if t.kind == "union":
            for part in t.parts:
                p, c, dn = box(part)
                add(p, c, dn * len(t.parts), 1)
        elif t.kind == "inout":
            p, c, dn = box(t.dims, [(t.version, t.t_version)])
            add(p, c, dn, 1)
            p, c, dn = box(t.dims, [(t.version, t.t_version)], shift=t.t)
            add(p, c, dn, -1)
        else:
            p, c, dn = box(t.dims)
            if any(t.t):
                add(p, c, dn, 2)
                p, c, dn = box(t.dims, shift=t.t)
                add(p, c, dn, -1)
            else:
                add(p, c, dn, 1)
    for f in F_terms:
        if (f[1] * L).denominator != 1:
            raise ModelError("internal: access term not integral after scaling")
    FL = sum(int(f[1] * L) * f[0] for f in F_terms)
    work = [product([(D[c], dom[c][0], dom[c][1]) for c in cls])[0]
            for _, cls in problem.work]
    P = sum(work)
    m.add(FL <= L * int(budget))
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

    return Encoded("cpsat", m, variables, decode, objective,
                   {"scale": L, "budget": int(budget)})
