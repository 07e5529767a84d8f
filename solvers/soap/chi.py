"""χ(X), X0 and the computational intensity ρ of a (subgraph) statement.

Section 5.4.5: χ(X) = max Σ_s ∏ |D^t| subject to Σ_j |A_j| ≤ X, |D^t| ≥ 1;
X0 = argmin χ(X)/(X − S); ρ = χ(X0)/(X0 − S).

* :func:`kkt` solves the KKT conditions of problem (5.8) with sympy (section
  4.3.2), trying active sets of the bounds |D^t| ≥ 1 (the exponent LP's guess
  first).  The work of one statement is a monomial, so λ is eliminated; the
  polynomial system in the free tile sizes is solved by bounded steps
  (:mod:`polysys`: linear elimination, factoring, quadratics) or given up —
  a structural test, so the route taken and the bound never depend on time
  or load.  A solution is accepted only if it is real, feasible, and no
  random feasible tile beats it (a numeric check that the stationary point
  is the global maximum).
* :func:`relaxation` is the fallback: a certified upper bound on χ that needs
  no equation solving.  Each access size is bounded below by a posynomial
  (Lemma 5.3 by ∏|D|; Corollary 5.1 by the mean of its leading monomials), and
  weighted AM–GM with the dual of the exponent LP gives
  χ(X) ≤ X^W ∏_j (w_j/(W c_j))^{w_j}.  The bound that follows is valid (ρ
  can only be overestimated) — and exact for monomial problems such as MMM.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.cases import has_max, split_cases
from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.numeric_search import numeric_tiles
from meshplan.solvers.soap.kkt import KKT_MAX_BRANCHES, KKT_MAX_DEGREE, kkt, kkt_system
from meshplan.solvers.soap.pyramid import pyramid_chi, pyramid_shape
from meshplan.solvers.soap.closed import closed_form, equality_tiles
from meshplan.solvers.soap.domination import linear_domination
from meshplan.solvers.soap.groups import independent_groups
from meshplan.solvers.soap.memo import IntensityMemo
from meshplan.solvers.soap.relax import joint_relaxation, relaxation
from meshplan.solvers.soap.symbols import S, X

__all__ = ["X", "S", "Intensity", "intensity", "kkt", "kkt_system", "relaxation", "linear_domination",
           "closed_form", "equality_tiles", "numeric_tiles", "KKT_MAX_DEGREE", "KKT_MAX_BRANCHES",
           "ARGMIN_MAX_DEGREE", "SAMPLE_S", "dominating", "rho_value_at"]

#: dχ/dX·(X − S) = χ is solved for X0 only if it is a polynomial of at most this
#: degree in X^(1/q) (roots in radicals); otherwise X0 = W·S/(W−1).
ARGMIN_MAX_DEGREE = 4


@dataclass(frozen=True)
class Intensity:
    """ρ of one (subgraph) statement and how it was obtained."""

    problem: SubProblem
    method: str                 # "kkt", "relaxation" or "unbounded"
    chi: sp.Expr | None         # χ(X)
    X0: sp.Expr                 # argmin_X χ(X)/(X-S), a function of S (oo: the limit X -> oo)
    rho: sp.Expr                # ρ(S); oo when no access bounds the work
    tiles: dict = field(default_factory=dict)   # class -> |D|(S) at X0 (continuous optimum)
    tiles_of_X: dict = field(default_factory=dict)
    exponent: Fraction = Fraction(0)            # W with χ(X) ~ X^W
    notes: tuple = ()
    cases: tuple = ()                           # per max case (section 5.5.3): its Intensity

    def rho_at(self, s: float) -> float:
        """The computational intensity ρ at fast-memory size ``s`` (∞ when no reuse bounds it)."""
        return rho_value_at(self.rho, s)

    def rho_numeric(self, s: float) -> float:
        """min over X > S of χ(X)/(X − S) at memory ``s``, searched numerically.

        χ is exact (KKT) or a certified upper bound (relaxation), and every X > S
        gives a valid intensity bound, so the numeric minimum is valid too; for
        the relaxation of fused statements it improves on the symbolic X0 =
        W·S/(W−1), which minimizes only the leading term.
        """
        if self.rho == sp.oo or self.chi is None:
            return self.rho_at(s)
        f = sp.lambdify(X, self.chi, "math")
        best = self.rho_at(s)

        def g(u: float) -> float:   # X = s·(1 + e^u)
            x = s * (1.0 + math.exp(u))
            try:
                return float(f(x)) / (x - s)
            except (OverflowError, ValueError, ZeroDivisionError):
                return math.inf

        grid = [k / 4.0 for k in range(-40, 80)]
        vals = [g(u) for u in grid]
        k = min(range(len(grid)), key=vals.__getitem__)
        lo, hi = grid[max(0, k - 1)], grid[min(len(grid) - 1, k + 1)]
        for _ in range(60):          # golden-section refinement around the best grid point
            m1, m2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
            if g(m1) <= g(m2):
                hi = m2
            else:
                lo = m1
        return min(best, vals[k], g((lo + hi) / 2))


@functools.lru_cache(maxsize=8192)
def rho_value_at(rho: sp.Expr, s: float) -> float:
    """``ρ(S = s)``, once per expression (subgraphs equal up to renaming share theirs).  ``xreplace`` rebuilds
    the expression as ``subs`` does for a symbol (the same sympy Float arithmetic and value), without
    ``subs``'s argument handling."""
    if rho == sp.oo:
        return math.inf
    return float(rho.xreplace({S: sp.Float(s)}))


# -- KKT ------------------------------------------------------------------------

SAMPLE_S = (2.0 ** 4, 2.0 ** 10, 2.0 ** 16, 2.0 ** 24, 2.0 ** 32)


def dominating(values: list[list[float]]) -> int | None:
    """The index of a row that is ≥ every other row at every sample (first such), else ``None``."""
    for i, row in enumerate(values):
        if all(all(a >= b * (1 - 1e-12) for a, b in zip(row, other)) for other in values):
            return i
    return None


def intensity(problem: SubProblem) -> Intensity:
    """ρ(S) of ``problem``: closed form, else KKT, else the certified relaxation.

    Which route is taken depends only on the problem's structure (monomial
    access terms; one statement, ≤ 4 tile variables and a KKT system within
    :data:`KKT_MAX_DEGREE`), never on time: the same program always gets the
    same bound.  A problem with maxima (non-injective sides, overlapping
    unions; section 5.5.3) is solved per case and the cases are combined by
    :func:`_combine`.
    """
    shape = pyramid_shape(problem)
    if shape is not None:
        d, tau = shape
        chi, X0, rho, W = pyramid_chi(d, tau, len(problem.work))
        return Intensity(problem, "pyramid", chi, X0, rho, exponent=W, notes=(
            f"iterated stencil ({d}-D, halo {tau} per layer): the largest subcomputation is a pyramid, "
            f"χ(X) = X^({d + 1}/{d})/({tau}·{d + 1}) + {len(problem.work)}·X (rectangles are smaller)",))
    whole = _intensity_whole(problem)
    groups = independent_groups(problem)
    if len(groups) < 2:
        return whole
    if len(_GROUPS._seen) > 4096:
        _GROUPS._seen.clear()
    split = _sum_of_groups(problem, [_GROUPS(g) for g in groups])
    if split is None:
        return whole
    # both are upper bounds on ρ: the split where it is below the undivided one at every sample, their
    # minimum where it is below only as S → ∞ (the leading term's; the sum gives each group the whole
    # budget, which can cost more than the union's loss at small S)
    mine = [rho_value_at(split.rho, s) for s in SAMPLE_S]
    other = [rho_value_at(whole.rho, s) for s in SAMPLE_S]
    if all(a <= b * (1 + 1e-12) for a, b in zip(mine, other)):
        return split
    if mine[-1] < other[-1] * (1 - 1e-9):
        return replace(split, rho=sp.Min(split.rho, whole.rho, evaluate=False))
    return whole


#: group problems recur across the subgraphs of a program (correlation's ``{S8, S9}``): derived once per
#: canonical key (renamed tiles translated back)
_GROUPS = IntensityMemo(lambda g: _intensity_whole(g))


def _sum_of_groups(problem: SubProblem, results: list[Intensity]) -> Intensity | None:
    """χ(X) ≤ Σ_g χ_g(X) over the groups of :func:`independent_groups`; ρ at the leading group's X0 (every
    X0 > S is valid).  ``None`` when a group is unbounded."""
    if any(r.rho == sp.oo or r.chi is None for r in results):
        return None
    k = max(range(len(results)), key=lambda i: (results[i].exponent, float(results[i].chi.subs(X, 1e12))))
    top = results[k]
    chi = sp.Add(*[r.chi for r in results])
    if top.X0 == sp.oo:
        rho = sp.Add(*[_rho_at_infinity(r.chi) for r in results])
    else:
        rho = simplified(chi.subs(X, top.X0) / (top.X0 - S))
    tiles, tiles_x = {}, {}
    for r in results:
        tiles.update(r.tiles)
        tiles_x.update(r.tiles_of_X)
    if tiles:   # a group without tiles (linear χ, X0 = ∞) gets the smallest tile: its work is of lower order
        tiles = {c: tiles.get(c, sp.Integer(1)) for c in problem.classes}
        tiles_x = {c: tiles_x.get(c, sp.Integer(1)) for c in problem.classes}
    names = "; ".join("{" + ", ".join(r.problem.statements) + "}" for r in results)
    notes = tuple(top.notes) + (f"χ(X) ≤ the sum of the χ of statement groups that share no tile variable ({names}); "
                                "a union of one array's reads restricted to each group (sections 5.5.3, 4.6.2)",)
    return Intensity(problem, top.method, chi, top.X0, rho, tiles, tiles_x, top.exponent, notes)


def _intensity_whole(problem: SubProblem) -> Intensity:
    if not has_max(problem):
        return _intensity_case(problem)
    results = [_intensity_case(c, tiles=False) for c in split_cases(problem)]
    return _combine(problem, results)


def _combine(problem: SubProblem, results: list[Intensity]) -> Intensity:
    """χ(X) = max over the cases; ρ ≤ max_c χ_c(X0)/(X0 − S) at the leading case's X0.

    Any X0 > S gives a valid intensity bound, so evaluating *every* case at the
    leading case's X0 keeps the bound valid (taking each case's own minimum
    and then the max would not be: min_X max_c ≥ max_c min_X).
    """
    unbounded = [r for r in results if r.rho == sp.oo]
    if unbounded:
        r = unbounded[0]
        return replace(r, problem=problem, cases=tuple(results))
    k = max(range(len(results)), key=lambda i: (results[i].exponent, float(results[i].chi.subs(X, 1e12))))
    if results[k].method == "relaxation":   # only the leading case's tiles are reported: derive them now
        results = results[:k] + [_with_tiles(results[k])] + results[k + 1:]
    top = results[k]
    X0 = top.X0
    # each case's ρ at X0, simplified only when it is kept (the values are compared numerically first:
    # expressions that differ at a sample are not equal, so sympy is asked only about numerical ties)
    raw = [_rho_at_infinity(r.chi) if X0 == sp.oo else r.chi.subs(X, X0) / (X0 - S) for r in results]

    def kept(i: int) -> sp.Expr:
        return raw[i] if X0 == sp.oo else simplified(raw[i])

    nums = [_samples(v, S, SAMPLE_S) for v in raw]
    uniq: list[int] = []
    for i in range(len(raw)):
        if not any(_close(nums[i], nums[j]) and simplified(kept(i) - kept(j)) == 0 for j in uniq):
            uniq.append(i)
    dom = dominating([nums[i] for i in uniq])
    rho = kept(uniq[dom]) if dom is not None else sp.Max(*[kept(i) for i in uniq], evaluate=False)
    chis: list = []
    xs = (1e3, 1e6, 1e9)
    for r in results:
        if not any(_close(_samples(r.chi, X, xs), _samples(c, X, xs)) and simplified(r.chi - c) == 0 for c in chis):
            chis.append(r.chi)
    chi = chis[0] if len(chis) == 1 else sp.Max(*chis, evaluate=False)   # the cases differ numerically
    notes = tuple(top.notes) + (f"χ(X) is the max over {len(results)} cases of the bounded overlap "
                                f"(section 5.5.3); the leading case: {top.problem.case}",)
    return Intensity(problem, top.method, chi, X0, rho, top.tiles, top.tiles_of_X, top.exponent,
                     notes, tuple(results))


def _samples(expr: sp.Expr, var: sp.Symbol, points) -> list[float]:
    """``expr`` at each of ``points`` (``nan`` where it does not evaluate to a real number)."""
    out = []
    for p in points:
        try:
            out.append(float(expr.subs(var, p)))
        except (TypeError, ValueError):
            out.append(math.nan)
    return out


def _close(a: list[float], b: list[float]) -> bool:
    """Equal at every sample up to float error (or not comparable there): a symbolic check may be needed."""
    return all(not (math.isfinite(x) and math.isfinite(y)) or abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))
               for x, y in zip(a, b))


def _intensity_case(problem: SubProblem, *, tiles: bool = True) -> Intensity:
    """ρ(S) of one case (every access term a product): closed form, KKT, relaxation.  Without
    ``tiles`` the relaxation's tiles (AM–GM equality point) are not derived: a max case that
    does not lead reports none."""
    relax = relaxation(problem)
    if relax is None:
        return Intensity(problem, "unbounded", None, sp.oo, sp.oo,
                         notes=("some loop variable appears in no access: χ is unbounded, ρ = ∞",))
    W = max(w for _, w, _ in relax)
    dom = max(relax, key=lambda r: r[1])
    guess = {c for c, v in dom[2].items() if v == 0}
    sol = closed_form(problem, relax)
    if sol is None and len(problem.work) == 1 and len(problem.classes) <= 4 and not problem.constraints:
        sol = kkt(problem, guess=guess)
    notes: list[str] = []
    if sol is not None:
        chi, tiles_x = sol
        X0 = _argmin(chi)
        if X0 is None:
            if W > 1:
                X0 = sp.Rational(W) * S / (sp.Rational(W) - 1)
                notes.append("dχ/dX = 0 not solved; X0 = W·S/(W-1) from the exponent (any X > S is valid)")
            else:
                X0 = sp.oo
        if X0 == sp.oo:
            rho = _rho_at_infinity(chi)
            tiles = {}
        else:
            rho = simplified(chi.subs(X, X0) / (X0 - S))
            tiles = {c: simplified(e.subs(X, X0)) for c, e in tiles_x.items()}
        return Intensity(problem, "kkt", chi, X0, rho, tiles, tiles_x, W, tuple(notes))
    joint, jnote = joint_relaxation(problem, relax)
    chi_relax = sp.Add(*[C * X ** sp.Rational(w) for C, w in joint])
    if jnote:
        notes.append(jnote)
    if W > 1:
        Wr = sp.Rational(W)
        X0 = Wr * S / (Wr - 1)
        rho = simplified(chi_relax.subs(X, X0) / (X0 - S))
    else:
        X0 = sp.oo
        rho = _rho_at_infinity(chi_relax)
    z = linear_domination(problem) if len(problem.work) > 1 else None
    if z is not None:
        zr = sp.Rational(z)
        if all(float(zr) <= float(rho.subs(S, sv)) for sv in (16.0, 2.0 ** 10, 2.0 ** 20, 2.0 ** 40)):
            chi_relax, X0, rho = zr * X, sp.oo, zr
            notes.append("χ(X) ≤ z·X by dominating each statement's work with one access term")
    notes.append("KKT not solved symbolically: certified AM-GM relaxation (valid, possibly weaker)")
    out = Intensity(problem, "relaxation", chi_relax, X0, rho, exponent=W, notes=tuple(notes))
    return _with_tiles(out, relax) if tiles else out


def _with_tiles(result: Intensity, relax=None) -> Intensity:
    """A relaxation ``result`` (derived without tiles) with its tiles: the AM–GM equality point of the
    leading statement at ``X0`` (none when ``X0 = ∞``) — the rest of the derivation is not repeated."""
    if result.X0 == sp.oo:
        return result
    relax = relaxation(result.problem) if relax is None else relax
    top = max(range(len(relax)), key=lambda k: relax[k][1])
    tiles_x = equality_tiles(result.problem, top) or {}
    if not tiles_x:
        return result
    tiles = {c: simplified(e.subs(X, result.X0)) for c, e in tiles_x.items()}
    return replace(result, tiles=tiles, tiles_of_X=tiles_x, notes=result.notes + (
        "tiles: AM-GM equality point of the relaxation for the leading statement "
        "(asymptotically optimal, lower-order terms ignored)",))


def _rho_at_infinity(chi: sp.Expr) -> sp.Expr:
    """``lim_{X→∞} χ(X)/(X − S)``: for ``χ = Σ C_w X^w`` (``C_w`` free of X) the sum of the ``C_w`` with
    ``w = 1`` (∞ if some ``w > 1``) — what sympy's ``limit`` gives, without its series machinery;
    other forms go to ``limit``."""
    terms = []
    for t in sp.Add.make_args(sp.expand(chi)):
        c, x = t.as_independent(X, as_Add=False)
        if x == 1:
            w = sp.Integer(0)
        elif x == X:
            w = sp.Integer(1)
        elif x.is_Pow and x.base == X and x.exp.is_Rational:
            w = x.exp
        else:
            return sp.limit(chi / (X - S), X, sp.oo)
        terms.append((c, w))
    if any(w > 1 for _, w in terms):
        return sp.limit(chi / (X - S), X, sp.oo)     # ±∞ by the sign of the leading coefficient
    return sp.Add(*[c for c, w in terms if w == 1])


def _argmin(chi: sp.Expr):
    """X0 minimizing χ(X)/(X-S) for large S (``oo`` if ρ(X) decreases for ever).

    ``dχ/dX·(X−S) = χ`` is solved only when it is a polynomial of degree ≤
    :data:`ARGMIN_MAX_DEGREE` in ``Y = X^(1/q)`` (``None`` otherwise: the
    caller then uses X0 = W·S/(W−1); every X > S gives a valid bound).
    """
    eq = sp.numer(sp.together(sp.diff(chi, X) * (X - S) - chi))
    q = 1
    for p in eq.atoms(sp.Pow):
        if p.base == X and p.exp.is_Rational:
            q = sp.ilcm(q, p.exp.q)
    Y = sp.Dummy("Y", positive=True)
    try:
        poly = sp.Poly(sp.expand(eq.subs(X, Y ** q)), Y)
    except sp.PolynomialError:
        return None
    if poly.degree() > ARGMIN_MAX_DEGREE or any(Y in c.free_symbols for c in poly.coeffs()):
        return None
    roots = [r ** q for r in sp.solve(poly.as_expr(), Y)] if poly.degree() > 0 else []
    good = []
    for r in roots:
        ok = True
        for sv in (1e3, 1e6):
            try:
                v = complex(sp.N(r.subs(S, sv)))
            except (TypeError, ValueError):
                ok = False
                break
            if abs(v.imag) > 1e-9 * abs(v.real) or v.real <= sv * (1 + 1e-12):
                ok = False
                break
        if ok:
            good.append(r)
    if not good:
        lim = sp.limit(chi / X, X, sp.oo)
        return sp.oo if lim.is_finite else None
    return min(good, key=lambda r: float((chi / (X - S)).subs(X, r).subs(S, 1e6)))
