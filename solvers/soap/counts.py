"""|V|: the iteration counts of a statement's loop nest, and the ranges they assume (section 2.4).

The vertices of an array in Theorem 5.1 are the iterations of the statements writing it.  The counts are
symbolic sums, closed by the counting capability's Faulhaber sums where the nest is a unit-step polynomial
one; :func:`check_ranges` rejects (or states the assumption of) a range that is reversed for some
iterations of the enclosing loops, where such a sum would be negative.
"""

from __future__ import annotations

import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Statement
from meshplan.models.soap.symbolic import simplified

__all__ = ["iterations", "check_ranges", "miscounted", "enumerated", "plain_bounds"]


def _range_lengths(st: Statement):
    """For every loop, its range length ``(upper − lower)·sign(step)`` at every vertex of the
    enclosing loops' domain (each enclosing variable at its first or last value), as expressions
    in the parameters.  The loop bounds are affine, so the smallest length over the domain is
    among these.  A vertex at which a loop's range is empty (a constant length ≤ 0, such as
    ``range(j)`` inside ``range(i)`` at ``i = 0``) runs no iteration of it, so the loops inside it
    are not visited there."""
    out = []
    envs: list[dict] = [{}]
    for n, lp in enumerate(st.loops):
        sign = 1 if lp.step > 0 else -1
        length = sign * (lp.upper - lp.lower)
        out.append((lp, list(dict.fromkeys(sp.expand(length.subs(env)) for env in envs))))
        later = set().union(*[(m.lower.free_symbols | m.upper.free_symbols) for m in st.loops[n + 1:]])
        if lp.symbol not in later:
            continue          # no later bound uses this variable: no need to visit its vertices
        last = lp.upper - sign
        envs = [{**env, lp.symbol: b.subs(env)} for env in envs
                if not ((ln := sp.expand(length.subs(env))).is_number and ln <= 0)
                for b in (lp.lower, last)]
    return out


def check_ranges(st: Statement, *, samples: int = 24) -> list[str]:
    """Loop ranges must not have negative length: a symbolic sum over such a range subtracts
    iterations (Σ_{k=a}^{b} with b < a−1 is negative), so |V| and the bound would be wrong.

    A range whose length is negative at some iteration *whatever the sizes* (``for j in
    range(1, N): for k in range(j+1, i+1)`` with ``j > i``) is rejected; one that is non-negative
    only for some sizes (``range(t, N−t)`` needs ``N ≥ 2t``) is accepted, and the returned notes
    state the assumption.  Regimes are sampled: the parameters at random large values."""
    import random

    plain_bounds(st)
    rng = random.Random(5)
    params = sorted({p for lp in st.loops for e in (lp.lower, lp.upper) for p in e.free_symbols},
                    key=lambda x: x.name)
    regimes = [{p: sp.Integer(1000) for p in params}] + [{p: sp.Integer(rng.randint(10, 10**6)) for p in params}
                                                         for _ in range(samples)]
    notes = []
    for lp, lengths in _range_lengths(st):
        lengths = list(dict.fromkeys(lengths))   # constant bounds repeat one length at every vertex
        negative = [e for e in lengths if e.is_number and e < 0 or
                    not e.is_number and any(float(e.xreplace(r)) < 0 for r in regimes)]
        if not negative:
            continue
        if all(any(float(e.xreplace(r)) < 0 for e in lengths) for r in regimes):
            raise ModelError(
                f"statement {st.name}: the range of loop {lp.var} (range({lp.lower}, {lp.upper})) is empty "
                f"with negative length for some iterations of the enclosing loops whatever the sizes "
                f"(length {min(negative, key=lambda e: float(e.xreplace(regimes[0])))}); its iterations "
                "cannot be counted by a symbolic sum — bound the enclosing loops so that the range is "
                "never reversed (e.g. iterate the outer variable only where the inner range is non-empty)")
        conds = sorted({f"{simplified(e)} >= 0" for e in negative if not e.is_number})
        notes.append(f"statement {st.name}: assumes loop {lp.var}'s range is never reversed, i.e. "
                     + " and ".join(conds))
    return notes


def plain_bounds(st: Statement) -> None:
    """Refuse (ModelError naming the statement's line) a loop bound with ``min``/``max``: its count is
    piecewise in the sizes (``Σ_{i,j} min(i, j)`` splits at ``i = j``), and Theorem 5.1's |V| and the
    leading term are taken here as one polynomial."""
    for lp in st.loops:
        for e in (lp.lower, lp.upper):
            if e.has(sp.Min, sp.Max):
                raise ModelError(
                    f"statement {st.name} (line {st.line}): loop {lp.var} has the bound {e}; the I/O bound "
                    "counts a loop nest's iterations as one polynomial in the sizes and does not split a "
                    "loop at a min/max — write the loop as one loop per piece (e.g. for k in range(min(i, j)) "
                    "as two nests, over j <= i and j > i)")


def iterations(st: Statement) -> sp.Expr:
    """|V_St|: the number of iterations of the statement's loop nest (a sympy sum).

    Unit-step loops over a polynomial count are summed in closed form by the counting
    capability's power sums (:func:`meshplan.solvers.counting.sums.closed_sum`, Faulhaber: the
    same value and sign convention as ``sympy.summation``, without its general machinery);
    anything else (strided loops) goes through ``sympy.summation``."""
    plain_bounds(st)
    fast = _polynomial_iterations(st)
    if fast is not None:
        return fast
    expr: sp.Expr = sp.Integer(1)
    for lp in reversed(st.loops):
        if lp.step == 1:
            expr = sp.summation(expr, (lp.symbol, lp.lower, lp.upper - 1))
        else:
            k = sp.Dummy("k", integer=True)
            body = expr.subs(lp.symbol, lp.lower + lp.step * k)
            expr = sp.summation(body, (k, 0, sp.ceiling((lp.upper - lp.lower) / lp.step) - 1))
    return sp.factor(simplified(expr))


def _polynomial_iterations(st: Statement) -> sp.Expr | None:
    from meshplan.solvers.counting.sums import closed_sum

    expr: sp.Expr = sp.Integer(1)
    for lp in reversed(st.loops):
        if lp.step != 1:
            return None
        expr = closed_sum(expr, lp.symbol, lp.lower, lp.upper - 1)
        if expr is None:
            return None
    return sp.factor(sp.expand(expr))


def miscounted(st: Statement, values: dict) -> bool:
    """Whether the closed-form counts of ``st`` may be wrong at the sizes ``values`` (parameter name →
    int): some loop's range is reversed (negative length) where the enclosing loops run — a symbolic
    sum over it subtracts (jacobi-2d's ``(N − 2)²`` is 1 at N = 1) — or the nest runs no iteration at
    all (the trivial floor's element counts take the loops a subscript does not use as running).
    Walks the vertices of the enclosing loops' domain as :func:`_range_lengths` does, with numbers: a
    vertex where a range is empty runs nothing inside it."""
    from meshplan.models.loops.program import sym

    envs: list[dict] = [{sym(k): sp.Integer(v) for k, v in values.items()}]
    for lp in st.loops:
        nxt: dict[tuple, dict] = {}
        for env in envs:
            lo, hi = lp.lower.xreplace(env), lp.upper.xreplace(env)
            if not (lo.is_Integer and hi.is_Integer):
                return True          # a bound that is no integer here: nothing to trust
            length = (hi - lo) if lp.step > 0 else (lo - hi)
            if length < 0:
                return True
            if length == 0:
                continue
            last = lo + lp.step * ((abs(hi - lo) - 1) // abs(lp.step))
            for b in (lo, last):
                e = {**env, lp.symbol: b}
                nxt[tuple(sorted((str(k), int(v)) for k, v in e.items()))] = e
        if not nxt:
            return True              # the nest runs nothing
        envs = list(nxt.values())
    return False


def enumerated(st: Statement, values: dict, limit: int = 100_000) -> int | None:
    """The iterations of ``st`` at the sizes ``values``, counted one by one (``None`` past ``limit``
    visited loop points): exact where a closed form is not (:func:`miscounted`)."""
    from meshplan.models.loops.program import sym

    base = {sym(k): sp.Integer(v) for k, v in values.items()}
    visited = 0

    def walk(depth: int, env: dict) -> int | None:
        nonlocal visited
        if depth == len(st.loops):
            return 1
        lp = st.loops[depth]
        lo, hi = lp.lower.xreplace(env), lp.upper.xreplace(env)
        if not (lo.is_Integer and hi.is_Integer):
            return None
        total = 0
        for v in range(int(lo), int(hi), lp.step):
            visited += 1
            if visited > limit:
                return None
            got = walk(depth + 1, {**env, lp.symbol: sp.Integer(v)})
            if got is None:
                return None
            total += got
        return total

    return walk(0, base)
