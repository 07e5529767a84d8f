"""The most loaded process of a block-distributed loop program, exactly, by Barvinok's algorithm.

In explicitly parallel code (thesis section 2.1, Example II) rank ``r`` of ``p`` runs the block
``[⌊r·E/p⌋, ⌊(r+1)·E/p⌋)`` of a loop over ``E`` points.  Its bounds multiply the rank by a parameter, so the
domain is not a quasi-affine set; with the block's ends as two new parameters ``L`` and ``H`` it is, and
Barvinok's algorithm (Verdoolaege et al., "Counting integer points in parametric polytopes using Barvinok's
rational functions", Algorithmica 48(1), 2007) counts it exactly as ``C(L, H)`` — also when other bounds
depend on the block, as in LU or Cholesky by block rows (``range(max(k + 1, L), H)``).

The most loaded rank is then found by a proof, not assumed: if moving a block right never lowers its count
(``C(L+1, H+1) >= C(L, H)``) and growing it to the left never lowers it (``C(L-1, H) >= C(L, H)``), every
block of at most ``⌈E/p⌉`` points counts at most the last block ``[E - ⌈E/p⌉, E)``, which is rank ``p - 1``'s.
isl proves both inequalities by bounding the differences from below (``isl_pw_qpolynomial_bound``); when it
cannot, :func:`count_blocks` gives up and the closed-form engine answers.
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


def _block_ends(flow: Flow, rank: sp.Symbol, p: sp.Symbol):
    """``(E, {floor(r·E/p): L, floor((r+1)·E/p): H})`` for the one extent ``E`` the rank is distributed over,
    or None when the rank appears in another form."""
    ext, rep = None, {}
    L, H = sym("blk_lo"), sym("blk_hi")
    for f in _floors(flow.body):
        x = f.args[0]
        if rank not in x.free_symbols:
            continue
        c = sp.diff(x, rank)
        E = sp.expand(c * p)
        a = sp.simplify((x - rank * c) / c) if c != 0 else None
        if a not in (0, 1) or rank in E.free_symbols or p in E.free_symbols or linear_form(E) is None:
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


def _card(dom: Domain, params: tuple[str, ...], shift: dict, extra: tuple = ()):
    import islpy as isl

    from meshplan.solvers.counting.barvinok import isl_text

    d = Domain(dom.statement, dom.counters, tuple(c.xreplace(shift) for c in dom.constraints) + extra)
    return isl.Set(isl_text(d, params)).card()


def _never_negative(diff, params: tuple[str, ...], region: str) -> bool:
    """True when isl bounds ``diff`` (a piecewise quasi-polynomial in the parameters) from below by a number
    >= 0 on ``region`` (isl constraint text on the parameters, all >= 0)."""
    import islpy as isl

    ctx = isl.Set(f"[{', '.join(params)}] -> {{ : {' and '.join(f'{q} >= 0' for q in params)} and {region} }}")
    d = diff.intersect_params(ctx).coalesce()
    n = d.dim(isl.dim_type.param)
    flat = d.move_dims(isl.dim_type.in_, 0, isl.dim_type.param, 0, n)
    fold, _tight = flat.bound(isl.fold.min)  # a lower bound over every parameter value, tight or not
    if fold.n_piece() == 0:  # the region is empty
        return True
    v = fold.eval(isl.Point.zero(fold.get_domain_space()))
    return not (v.is_nan() or v.is_neg() or v.is_neginfty())


def count_blocks(flow: Flow, procs: str = "p") -> dict[str, sp.Expr] | None:
    """Per statement the count of the most loaded rank (rank ``p - 1``'s block, proved the heaviest) as an
    exact expression in the parameters and ``p``; None when the program is not a block distribution of one
    extent over the ranks, the extent may be negative, a domain is not quasi-affine, or isl cannot prove
    the last block the heaviest."""
    from meshplan.solvers.counting.analyze import param_symbol, unknown_symbol
    from meshplan.solvers.counting.barvinok import count_domains, is_available

    if flow.rank is None or not is_available():
        return None
    rank, p = sym(flow.rank), sym(procs)
    got = _block_ends(flow, rank, p)
    if got is None:
        return None
    E, rep = got
    terms, const = linear_form(E)
    nonneg = const >= 0 and all(c >= 0 for c in terms.values())  # E >= 0 for every parameter value
    body = _map(flow.body, rep)
    if any(rank in e.free_symbols for e in _exprs(body)):
        return None
    doms = statement_domains(replace(flow, body=body, rank=None))
    if not all(isinstance(d, Domain) for d in doms.values()):
        return None
    L, H = sym("blk_lo"), sym("blk_hi")
    fixed = (sp.Ge(L, 0), sp.Ge(H, L), sp.Ge(E, H))  # facts of every block when E >= 0: 0 <= L <= H <= E
    below = (sp.Le(L, 0), sp.Le(H, L), sp.Le(E, H), sp.Lt(E, 0))  # and when E < 0: E <= H <= L <= 0
    plain = doms
    doms = {k: Domain(d.statement, d.counters, d.constraints + fixed) for k, d in doms.items()}
    params = tuple(dict.fromkeys([*flow.params, *sorted({s.name for d in doms.values() for c in d.constraints
                                                          for s in c.free_symbols} - {c.name for d in doms.values()
                                                                                      for c in d.counters}
                                                         - {L.name, H.name})]))
    params = tuple(q for q in params if q not in (L.name, H.name, procs)) + (L.name, H.name)
    e_txt = _isl_expr(E)
    if not nonneg:  # an extent that may be negative (jacobi's n - 2): no rank may run anything then
        for d in plain.values():
            neg = _card(Domain(d.statement, d.counters, d.constraints + below), params, {})
            if not neg.is_zero():
                return None
    for d in doms.values():
        right = _card(d, params, {L: L + 1, H: H + 1}).sub(_card(d, params, {}))
        grow = _card(d, params, {L: L - 1}).sub(_card(d, params, {}))
        if not (_never_negative(right, params, f"blk_lo <= blk_hi and blk_hi + 1 <= {e_txt}")
                and _never_negative(grow, params, f"1 <= blk_lo and blk_lo <= blk_hi and blk_hi <= {e_txt}")):
            return None
    counts = count_domains(doms, params)
    if counts is None:
        return None
    Eu = E.xreplace({s: unknown_symbol(s.name) for s in E.free_symbols})
    P = param_symbol(procs)
    last = {unknown_symbol(L.name): Eu - sp.ceiling(Eu / P), unknown_symbol(H.name): Eu}
    return {k: c.expr.xreplace(last) for k, c in counts.items()}


def _isl_expr(e: sp.Expr) -> str:
    from meshplan.solvers.counting.barvinok import _aff

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
