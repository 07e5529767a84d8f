"""The most loaded process of a block-distributed loop program, exactly, by Barvinok's algorithm.

In explicitly parallel code (thesis section 2.1, Example II) rank ``r`` of ``p`` runs the block
``[⌊r·E/p⌋, ⌊(r+1)·E/p⌋)`` of a loop over ``E`` points.  Its bounds multiply the rank by a parameter, so the
domain is not a quasi-affine set; with the block's ends as two new parameters ``L`` and ``H`` it is, and
Barvinok's algorithm (Verdoolaege et al., "Counting integer points in parametric polytopes using Barvinok's
rational functions", Algorithmica 48(1), 2007) counts it exactly as ``C(L, H)`` — also when other bounds
depend on the block, as in LU or Cholesky by block rows (``range(max(k + 1, L), H)``).

On a process grid every dimension's rank variable selects a block of its own extent, each with its own two
ends; the proof below is made per dimension, for every value of the other dimensions' ends, so the last block
of every dimension together is the heaviest.

The most loaded rank is then found by a proof, not assumed: if moving a block right never lowers its count
(``C(L+1, H+1) >= C(L, H)``) and growing it to the left never lowers it (``C(L-1, H) >= C(L, H)``), every
block of at most ``⌈E/p⌉`` points counts at most the last block ``[E - ⌈E/p⌉, E)``, which is rank ``p - 1``'s.
Each inequality is proved in one of two sound ways:

* by a one-to-one map: a translation of the loop counters (``j -> j + 1`` for the loop over the block, or
  none) that maps the domain at ``(L, H)`` into the domain at ``(L+1, H+1)`` (resp. ``(L-1, H)``) for every
  parameter value at once — an inclusion of Presburger sets, which isl decides; this needs no bound of a
  polynomial, so it holds where the counts grow without bound with the parameters (LU's trailing update on a
  p × q grid, whose count difference isl's Bernstein bounds take to −∞ over the unbounded ``n``);
* otherwise by bounding the count difference from below (``isl_pw_qpolynomial_bound``) by a number >= 0.

When neither succeeds, :func:`count_blocks` gives up and the closed-form engine answers (and says when it is
not exact).
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from meshplan.models.counting.domains import Domain, linear_form, statement_domains
from meshplan.models.loops.control import Assign, Branch, Flow, Loop, Opaque
from meshplan.models.loops.program import sym

__all__ = ["count_blocks"]


def _floors(nodes) -> set:
    out: set = set()
    for nd in nodes:
        exprs = (nd.guard if isinstance(nd, Loop) else nd.values if isinstance(nd, Assign) else
                 (nd.cond,) if isinstance(nd, Branch) else (nd.cond,) if isinstance(nd, Opaque) and nd.cond is not None
                 else ())
        for e in exprs:
            out |= e.atoms(sp.floor)
        if isinstance(nd, (Loop, Opaque)):
            out |= _floors(nd.body)
        elif isinstance(nd, Branch):
            out |= _floors(nd.then) | _floors(nd.orelse)
    return out


def _block_ends(flow: Flow, rank: sp.Symbol, p: sp.Symbol, L: sp.Symbol, H: sp.Symbol, others: set):
    """``(E, {floor(r·E/p): L, floor((r+1)·E/p): H})`` for the one extent ``E`` the rank is distributed over,
    or None when the rank appears in another form (``others``: the grid's other rank variables and counts,
    which ``E`` may not contain)."""
    ext, rep = None, {}
    for f in _floors(flow.body):
        x = f.args[0]
        if rank not in x.free_symbols:
            continue
        c = sp.diff(x, rank)
        E = sp.expand(c * p)
        a = sp.simplify((x - rank * c) / c) if c != 0 else None
        if (a not in (0, 1) or rank in E.free_symbols or p in E.free_symbols or E.free_symbols & others
                or linear_form(E) is None):
            return None
        if ext is not None and sp.expand(E - ext) != 0:
            return None
        ext = E
        rep[f] = L if a == 0 else H
    return (ext, rep) if ext is not None else None


def _map(nodes, rep: dict) -> tuple:
    out = []
    for nd in nodes:
        if isinstance(nd, Loop):
            nd = replace(nd, guard=tuple(g.xreplace(rep) for g in nd.guard), body=_map(nd.body, rep))
        elif isinstance(nd, Assign):
            nd = replace(nd, values=tuple(v.xreplace(rep) for v in nd.values))
        elif isinstance(nd, Branch):
            nd = replace(nd, cond=nd.cond.xreplace(rep), then=_map(nd.then, rep), orelse=_map(nd.orelse, rep))
        elif isinstance(nd, Opaque):
            nd = replace(nd, cond=None if nd.cond is None else nd.cond.xreplace(rep), body=_map(nd.body, rep))
        out.append(nd)
    return tuple(out)


def _set(dom: Domain, params: tuple[str, ...], shift: dict, extra: tuple = ()):
    import islpy as isl

    from meshplan.solvers.counting.barvinok import isl_text

    d = Domain(dom.statement, dom.counters, tuple(c.xreplace(shift) for c in dom.constraints) + extra)
    return isl.Set(isl_text(d, params))


def _card(dom: Domain, params: tuple[str, ...], shift: dict, extra: tuple = ()):
    from meshplan.solvers.counting.barvinok import card

    return card(_set(dom, params, shift, extra))


def _context(params: tuple[str, ...], region: str):
    import islpy as isl

    return isl.Set(f"[{', '.join(params)}] -> {{ : {' and '.join(f'{q} >= 0' for q in params)} and {region} }}")


def _injects(dom: Domain, params: tuple[str, ...], shift: dict, region: str, ends: tuple) -> bool:
    """True when a translation of the counters maps the domain at every parameter value of ``region`` into the
    domain with the block's ends moved by ``shift``: a one-to-one map, so the moved block counts at least as
    many points (isl decides the inclusion of the two Presburger sets exactly, for all parameter values at
    once).  The translations tried move no counter, or by ±1 one counter (or every counter) whose bounds
    name the block's ends ``ends`` — the loop over the block (``i -> i + 1`` when the block moves right)."""
    import islpy as isl

    src = _set(dom, params, {}).intersect_params(_context(params, region))
    dst = _set(dom, params, shift)
    names = [c.name for c in dom.counters]
    moved = [k for k, c in enumerate(dom.counters)
             if any(c in g.free_symbols and g.free_symbols & set(ends) for g in dom.constraints)]
    steps = [()] + [(k,) for k in moved] + ([tuple(moved)] if len(moved) > 1 else [])
    for step in steps:
        for sign in ((1,) if not step else (1, -1)):
            image = ", ".join(f"{x} + {sign}" if k in step else x for k, x in enumerate(names))
            m = isl.Map(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] -> [{image}] }}")
            if src.apply(m).is_subset(dst):
                return True
    return False


def _never_negative(diff, params: tuple[str, ...], region: str) -> bool:
    """True when isl bounds ``diff`` (a piecewise quasi-polynomial in the parameters) from below by a number
    >= 0 on ``region`` (isl constraint text on the parameters, all >= 0)."""
    import islpy as isl

    ctx = _context(params, region)
    d = diff.intersect_params(ctx).coalesce()
    n = d.dim(isl.dim_type.param)
    flat = d.move_dims(isl.dim_type.in_, 0, isl.dim_type.param, 0, n)
    fold, _tight = flat.bound(isl.fold.min)  # a lower bound over every parameter value, tight or not
    if fold.n_piece() == 0:  # the region is empty
        return True
    v = fold.eval(isl.Point.zero(fold.get_domain_space()))
    return not (v.is_nan() or v.is_neg() or v.is_neginfty())


def count_blocks(flow: Flow, procs: str = "p") -> dict[str, sp.Expr] | None:
    """Per statement the count of the most loaded rank (rank ``p - 1``'s block, proved the heaviest; on a
    process grid the last block of every dimension) as an exact expression in the parameters and the process
    counts; None when the program is not a block distribution of one extent per grid dimension, an extent may
    be negative, a domain is not quasi-affine, or isl cannot prove the last blocks the heaviest."""
    from meshplan.solvers.counting.analyze import param_symbol, unknown_symbol
    from meshplan.solvers.counting.barvinok import count_domains, is_available

    grid = flow.ranks(procs)
    if not grid or not is_available():
        return None
    names = {sym(x) for pair in grid for x in pair}
    dims = []  # per grid dimension: (E, L, H)
    rep: dict = {}
    for d, (r, q) in enumerate(grid):
        L, H = sym(f"blk_lo{d or ''}"), sym(f"blk_hi{d or ''}")
        got = _block_ends(flow, sym(r), sym(q), L, H, names - {sym(r), sym(q)})
        if got is None:
            return None
        dims.append((got[0], L, H))
        rep.update(got[1])
    body = _map(flow.body, rep)
    if any(e.free_symbols & {sym(r) for r, _ in grid} for e in _exprs(body)):
        return None
    plain = statement_domains(replace(flow, body=body, rank=None, grid=()))
    if not all(isinstance(d, Domain) for d in plain.values()):
        return None
    fixed = tuple(c for E, L, H in dims for c in (sp.Ge(L, 0), sp.Ge(H, L), sp.Ge(E, H)))  # 0 <= L <= H <= E
    doms = {k: Domain(d.statement, d.counters, d.constraints + fixed) for k, d in plain.items()}
    ends = [x.name for _, L, H in dims for x in (L, H)]
    params = tuple(dict.fromkeys([*flow.params, *sorted({s.name for d in doms.values() for c in d.constraints
                                                          for s in c.free_symbols} - {c.name for d in doms.values()
                                                                                      for c in d.counters}
                                                         - set(ends))]))
    params = tuple(x for x in params if x not in ends and x not in {q for _, q in grid}) + tuple(ends)
    for E, L, H in dims:
        terms, const = linear_form(E)
        if not (const >= 0 and all(c >= 0 for c in terms.values())):  # an extent that may be negative (jacobi's
            below = (sp.Le(L, 0), sp.Le(H, L), sp.Le(E, H), sp.Lt(E, 0))  # n - 2): no rank may run anything then
            for d in plain.values():
                if not _card(Domain(d.statement, d.counters, d.constraints + below), params, {}).is_zero():
                    return None
        e_txt = _isl_expr(E)
        lo, hi = L.name, H.name
        # the other dimensions' blocks: the earlier ones already at their last block (H = E), which they are
        # proved the heaviest at for every block of this and the later dimensions
        k = [x[1] for x in dims].index(L)
        rest = "".join(f" and 0 <= {L2.name} and {L2.name} <= {H2.name} and {H2.name} "
                       f"{'=' if j < k else '<='} {_isl_expr(E2)}" for j, (E2, L2, H2) in enumerate(dims) if j != k)
        for d in doms.values():
            for shift, region in (({L: L + 1, H: H + 1}, f"{lo} <= {hi} and {hi} + 1 <= {e_txt}{rest}"),
                                  ({L: L - 1}, f"1 <= {lo} and {lo} <= {hi} and {hi} <= {e_txt}{rest}")):
                if not (_injects(d, params, shift, region, (L, H))
                        or _never_negative(_card(d, params, shift).sub(_card(d, params, {})), params, region)):
                    return None
    counts = count_domains(doms, params)
    if counts is None:
        return None
    last = {}
    for (E, L, H), (_, q) in zip(dims, grid):
        Eu = E.xreplace({s: unknown_symbol(s.name) for s in E.free_symbols})
        last.update({unknown_symbol(L.name): Eu - sp.ceiling(Eu / param_symbol(q)), unknown_symbol(H.name): Eu})
    return {k: _plain_conditions(c.expr.xreplace(last)) for k, c in counts.items()}


def _plain_conditions(e: sp.Expr) -> sp.Expr:
    """Conditions ``E >= E - ceiling(E/q) + 1`` (a block is not empty) as ``E >= 1``: with ``q >= 1``,
    ``ceiling(E/q) >= 1`` exactly when ``E >= 1``."""
    def rule(rel):
        d = sp.expand(rel.lhs - rel.rhs)
        cs = d.atoms(sp.ceiling)
        if len(cs) != 1:
            return rel
        (c,) = cs
        a, k = d.coeff(c), d.subs(c, 0)
        x = c.args[0]
        num, den = sp.fraction(sp.together(x))
        if not (a.is_number and a > 0 and k.is_number and den.is_Symbol and den.is_positive):
            return rel
        t = -k / a  # the relation is ceiling(E/q) >= t (or > t)
        if isinstance(rel, sp.Gt):
            t = sp.floor(t) + 1
        t = sp.ceiling(t)
        return sp.Ge(num, 1) if t == 1 else rel
    return e.replace(lambda x: isinstance(x, (sp.Ge, sp.Gt)) and x.has(sp.ceiling), rule)


def _isl_expr(e: sp.Expr) -> str:
    from meshplan.solvers.counting.islsets import _aff

    return _aff(e)


def _exprs(nodes):
    for nd in nodes:
        if isinstance(nd, Loop):
            yield from nd.guard
            yield from _exprs(nd.body)
        elif isinstance(nd, Assign):
            yield from nd.values
        elif isinstance(nd, Branch):
            yield nd.cond
            yield from _exprs(nd.then)
            yield from _exprs(nd.orelse)
        elif isinstance(nd, Opaque):
            if nd.cond is not None:
                yield nd.cond
            yield from _exprs(nd.body)
