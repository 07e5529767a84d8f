"""Closed forms of affine updates and counting functions (thesis sections 2.4.1, 2.4.3).

* :func:`closed_form` — ``x(d) = A^d x0 + sum_{j<d} A^j b`` (equation 2.3): diagonal ``A`` variable by
  variable, otherwise the power of the augmented matrix ``[[A, b], [0, 1]]`` (sympy uses the Jordan form,
  so defective ``A`` such as ``y += z; z += 1`` works too);
* :func:`counting_function` — the number of iterations ``n = min d: s(d) <= 0`` of one guard slack
  (equation 2.4): linear slacks give ``ceil(alpha / -beta)``, geometric ones ``ceil(log(r) / log(a))``,
  quadratic ones the ceiling of a root; slacks with numbers only are counted directly;
* :func:`counting_bounds` — a lower and an upper count for slacks with several geometric terms (linear
  recurrences such as ``x, y = y, x + y``): one dominant term, the others bounded in size.
"""

from __future__ import annotations

import sympy as sp

from meshplan.solvers.counting.sums import clamp0

__all__ = ["closed_form", "counting_function", "counting_bounds", "NotAffine"]


class NotAffine(Exception):
    """The loop is outside the class of section 2.2 (the message says why)."""


def closed_form(A: sp.Matrix, b: sp.Matrix, x0: sp.Matrix, d: sp.Symbol) -> sp.Matrix:
    """The value of ``x`` after ``d`` iterations of ``x <- A x + b`` from ``x0`` (equation 2.3)."""
    m = A.shape[0]
    if A.is_diagonal():
        out = []
        for k in range(m):
            a, bk = A[k, k], b[k]
            if a == 1:
                out.append(x0[k] + bk * d)
            elif a == 0:
                out.append(sp.Piecewise((x0[k], sp.Eq(d, 0)), (bk, True)))
            else:
                out.append(a ** d * x0[k] + bk * (a ** d - 1) / (a - 1))
        return sp.Matrix(out)
    if not A.free_symbols:  # sympy's Jordan form of a matrix with cubic (or worse) eigenvalues takes minutes
        _, factors = A.charpoly().factor_list()
        if any(f.degree() > 2 for f, _ in factors):
            raise NotAffine("the update matrix has eigenvalues of degree 3 or more (no closed form is formed)")
    M = sp.zeros(m + 1, m + 1)
    M[:m, :m] = A
    M[:m, m] = b
    M[m, m] = 1
    try:
        P = M ** d
    except Exception as err:  # sympy raises several types for powers it cannot take
        raise NotAffine(f"no closed form of the update matrix power ({type(err).__name__})") from err
    return sp.Matrix([sp.expand(e) for e in (P[:m, :m] * x0 + P[:m, m])])


def _geometric(s: sp.Expr, d: sp.Symbol):
    """``s = alpha + gamma * a**d`` -> (alpha, gamma, a) or None."""
    alpha, rest = s.as_independent(d, as_Add=True)
    base, gamma = None, sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(rest)):
        coeff, powpart = term.as_independent(d, as_Add=False)
        if not (isinstance(powpart, sp.Pow) and d in powpart.exp.free_symbols and d not in powpart.base.free_symbols):
            return None
        k, e0 = sp.Poly(powpart.exp, d).all_coeffs() if sp.Poly(powpart.exp, d).degree() == 1 else (None, None)
        if k is None:
            return None
        a = powpart.base ** k
        if base is None:
            base = a
        elif sp.expand(a - base) != 0:
            return None
        gamma += coeff * powpart.base ** e0
    if base is None:
        return None
    return alpha, gamma, base


def counting_function(s: sp.Expr, d: sp.Symbol, *, limit: int = 100_000) -> sp.Expr:
    """Iterations of ``while s(d) > 0: d += 1`` from ``d = 0`` (equation 2.4)."""
    s = sp.expand(s)
    if d not in s.free_symbols:
        raise NotAffine("the guard does not change in the loop (it never stops or never runs)")
    linear = s.is_polynomial(d) and sp.Poly(s, d).degree() == 1
    if not (s.free_symbols - {d}) and not linear:  # numbers only: count exactly (a linear guard has a formula below)
        for k in range(limit):
            if not bool(s.subs(d, k) > 0):
                return sp.Integer(k)
        raise NotAffine(f"the loop runs more than {limit} times with these constants")
    if s.is_polynomial(d):
        poly = sp.Poly(s, d)
        deg = poly.degree()
        if deg == 1:
            beta, alpha = poly.all_coeffs()
            if beta.is_positive:
                raise NotAffine("the guard slack grows with every iteration (the loop never stops)")
            return clamp0(sp.ceiling(alpha / (-beta)))
        if deg == 2:  # the first crossing is (-b - sqrt(b^2 - 4ac)) / 2a for either sign of a
            a2, b2, c2 = poly.all_coeffs()
            disc = sp.expand(b2 ** 2 - 4 * a2 * c2)
            if disc.is_negative:
                raise NotAffine("the guard never changes sign")
            first = sp.ceiling(sp.radsimp((-b2 - sp.sqrt(disc)) / (2 * a2)))
            if a2.is_negative and not disc.is_number and sp.expand(-b2 / (2 * a2)).is_nonpositive:
                # a falling parabola whose vertex is at d <= 0: where disc < 0 (a parameter 0) the guard is never
                # positive, and sqrt(Max(0, disc)) puts the crossing at the vertex, so the clamped count is 0
                # (put in after radsimp, which would evaluate the Max away for parameters >= 1, and before the
                # outer clamp, which xreplace would evaluate away in the same way)
                first = first.xreplace({sp.sqrt(disc): sp.sqrt(sp.Max(0, disc, evaluate=False))})
            first = _clamp_edge(first)
            if disc.is_nonnegative or not a2.is_negative:
                return first
            # a falling parabola with no real root is never positive: the loop does not run (no complex count)
            return sp.Piecewise((first, disc >= 0), (0, True))
        raise NotAffine(f"the guard is a degree-{deg} polynomial in the iteration count")
    geo = _geometric(s, d)
    if geo is None:
        raise NotAffine("the guard mixes geometric and non-geometric growth")
    alpha, gamma, a = geo
    ratio = sp.expand_log(sp.log(-alpha / gamma), force=True)
    dstar = sp.expand(ratio / sp.log(a))
    return _clamp_edge(sp.ceiling(dstar))


def _clamp_edge(e: sp.Expr) -> sp.Expr:
    """``Max(0, e)`` kept even where parameters >= 1 make it redundant: a root or log counting function is
    negative (``ceiling(log(1/3)/log(3)) = -1``), complex or ``log(0)`` when a parameter is 0 and the loop does
    not run; the clamp makes it 0 there (evaluation takes ``log(0)`` as the limit ``-oo``)."""
    e = sp.sympify(e)
    edge = e.free_symbols and (e.has(sp.log) or any(not a.exp.is_Integer for a in e.atoms(sp.Pow)))
    if not edge:
        return clamp0(e)
    return sp.Max(0, e, evaluate=False)


def counting_bounds(s: sp.Expr, d: sp.Symbol) -> tuple[sp.Expr, sp.Expr] | None:
    """Lower and upper iteration counts of ``while s(d) > 0`` for ``s = alpha + sum_k gamma_k a_k**d`` with
    numbers ``a_k`` and ``gamma_k``, one dominant decreasing term (``|a_1| > 1``, ``gamma_1 < 0``) and the
    others of bounded size (``|a_k| <= 1``, so ``|gamma_k a_k**d| <= |gamma_k|``): the update of a linear
    recurrence such as ``x, y = y, x + y`` (Fibonacci: ``a_1 = (1 + sqrt 5)/2``, ``a_2 = (1 - sqrt 5)/2``).
    With ``E = sum_k>1 |gamma_k|``, ``alpha - E + gamma_1 a_1**d <= s <= alpha + E + gamma_1 a_1**d``, so the
    counts of those two slacks (equation 2.4) bound the count, and they differ by at most
    ``log((alpha + E)/(alpha - E)) / log(a_1) + 1``, which tends to 1 as ``alpha`` grows.  None for other forms."""
    s = sp.expand(s)
    alpha, rest = s.as_independent(d, as_Add=True)
    groups: dict = {}
    for term in sp.Add.make_args(rest):
        coeff, pw = term.as_independent(d, as_Add=False)
        if not (isinstance(pw, sp.Pow) and pw.exp == d and pw.base.is_number and coeff.is_number):
            return None
        key = sp.nsimplify(pw.base)
        groups[key] = groups.get(key, 0) + coeff
    terms = [(a, sp.nsimplify(sp.radsimp(g))) for a, g in groups.items() if sp.N(g, 30) != 0]
    if len(terms) < 2:
        return None
    terms.sort(key=lambda t: -abs(sp.N(t[0], 30)))
    (a1, g1), others = terms[0], terms[1:]
    if not (sp.N(a1, 30) > 1 and sp.N(g1, 30) < 0) or any(abs(sp.N(a, 30)) > 1 for a, _ in others):
        return None
    E = sp.nsimplify(sum(abs(sp.N(g, 30)) for _, g in others), tolerance=1e-25, rational=False)
    E = sp.Rational(sp.ceiling(sp.N(E, 30) * 10 ** 12), 10 ** 12)  # a rational just above the sum
    g1, a1 = sp.radsimp(g1), sp.radsimp(a1)

    def count(a):  # equation 2.4 for a + g1 a1**d (no log expansion: it is slow on surds)
        return _clamp_edge(sp.ceiling(sp.log(a / -g1) / sp.log(a1)))
    return count(alpha - E), count(alpha + E)

