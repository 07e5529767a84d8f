"""The processor-grid choice of distributed MMM as a CP-SAT model (sections 3.6.3 and 3.7.1).

Integer pm, pn, pk with ``p − ⌊δp⌋ ≤ pm·pn·pk ≤ p`` (at most a fraction δ of the ranks idle, section 3.7.1),
each at most its matrix dimension; integer rounds t ≥ 1.  With cm = ⌈m/pm⌉, cn = ⌈n/pn⌉, ck = ⌈k/pk⌉:

    W = (cm − ⌊cm/pn⌋)·ck + (cn − ⌊cn/pm⌋)·ck + (pk − 1)·⌈cm·cn/pk⌉      (max words received per rank)
    mem = ⌈cm/pn⌉·ck + ⌈cn/pm⌉·ck + [pk>1]·cm·cn + ⌈cm·cn/pk⌉ + ([pn>1]·cm + [pm>1]·cn)·⌈ck/t⌉ ≤ S

(only the buffers that exist: a C accumulator when C is reduced, an A / B receive panel when A / B pieces
are gathered)

minimize W, ties broken by fewer rounds t: lexicographically, in two solves — :func:`encode_grid` minimizes W,
``encode_grid(…, words=W*)`` then fixes W = W* and minimizes t (one weighted objective would overflow
CP-SAT's 64-bit integers for large sizes).  CP-SAT returns any of the grids of least (W, t), so a third
solve, ``encode_grid(…, words=W*, rounds=t*)``, fixes both and picks one grid by a fixed order: the most
ranks used, then the smallest pk, pm (pn follows) — one weighted objective
``(p − used)·B² + pk·B + pm`` (B > every pk and pm), or one solve per term where that would pass 2⁶².  The formulas are
:func:`~meshplan.models.matmul.costs.cosma_max_words` and :func:`~meshplan.models.matmul.costs.cosma_memory`;
the solver's answer is re-checked with them (and by enumeration) in :mod:`meshplan.solvers.matmul.plan`.
"""

from __future__ import annotations

from meshplan.encodings.core.base import Encoded, var_name
from meshplan.models.matmul.problem import Grid, MatmulProblem

__all__ = ["encode_grid"]


def _ceil_div(model, num, den, hi: int, name: str):
    """A variable equal to ⌈num/den⌉ (num a linear expression ≥ 0, den a variable ≥ 1)."""
    q = model.NewIntVar(0, hi, name)
    model.AddDivisionEquality(q, num + den - 1, den)
    return q


def _prod(model, a, b, hi: int, name: str):
    v = model.NewIntVar(0, hi, name)
    model.AddMultiplicationEquality(v, [a, b])
    return v


def encode_grid(prob: MatmulProblem, idle_tolerance: float, words: int | None = None, rounds: int | None = None,
                tie: tuple[int, ...] = ()) -> Encoded:
    """CP-SAT model of the grid choice: minimize W, or with ``words`` given, fix W to it and minimize the
    rounds; with ``rounds`` given too, fix both and minimize the tie-break (module docstring).  ``tie``
    fixes the tie-break's leading terms (``(used,)``, ``(used, pk)``) when it takes one solve per term.
    ``decode`` gives ``(Grid, rounds)``."""
    from ortools.sat.python import cp_model

    m, n, k, p = prob.m, prob.n, prob.k, prob.p
    md = cp_model.CpModel()
    pm = md.NewIntVar(1, min(p, m), var_name("p", "m"))
    pn = md.NewIntVar(1, min(p, n), var_name("p", "n"))
    pk = md.NewIntVar(1, min(p, k), var_name("p", "k"))
    used = _add_ranks(md, pm, pn, pk, p, idle_tolerance)
    cm = _ceil_div(md, m, pm, m, "cm")
    cn = _ceil_div(md, n, pn, n, "cn")
    ck = _ceil_div(md, k, pk, k, "ck")
    fixed, fixed_rounds = words, rounds
    words = _add_words(md, m, n, k, pm, pn, pk, cm, cn, ck)
    rounds = md.NewIntVar(1, k, var_name("rounds"))
    md.Add(rounds <= ck)
    _add_memory(md, prob.memory, m, n, k, pm, pn, pk, cm, cn, ck, rounds)
    if fixed is None:
        md.Minimize(words)
    elif fixed_rounds is None:
        md.Add(words == fixed)
        md.Minimize(rounds)
    else:
        md.Add(words == fixed)
        md.Add(rounds == fixed_rounds)
        _add_tie_break(md, used, pm, pk, p, min(p, max(m, k)) + 1, tie)
    variables = {"pm": pm, "pn": pn, "pk": pk, "rounds": rounds, "words": words, "used": used}

    def decode(values) -> tuple[Grid, int]:
        return Grid(int(values["pm"]), int(values["pn"]), int(values["pk"])), int(values["rounds"])

    return Encoded("cpsat", md, variables, decode, objective=True)


def _add_ranks(md, pm, pn, pk, p: int, tol: float):
    used_mn = _prod(md, pm, pn, p * p, "used_mn")
    used = _prod(md, used_mn, pk, p * p * p, "used")
    md.Add(used <= p)
    md.Add(used >= p - int(tol * p))
    return used


def tie_break_fits(p: int, bound: int) -> bool:
    """Whether the tie-break ``(p − used)·B² + pk·B + pm`` (B = ``bound``) stays below 2⁶²: one solve."""
    return (p + 1) * bound * bound < 2**62


def _add_tie_break(md, used, pm, pk, p: int, bound: int, tie: tuple[int, ...]) -> None:
    """Minimize ``(p − used, pk, pm)`` lexicographically: weighted in one objective when it fits in 64 bits,
    else the next term after the fixed ``tie`` terms (the solver calls once per term)."""
    idle = md.NewIntVar(0, p, "idle")  # its own small domain: CP-SAT refuses an objective that may overflow
    md.Add(idle == p - used)
    if tie_break_fits(p, bound):
        md.Minimize(idle * bound * bound + pk * bound + pm)
        return
    terms = (idle, pk, pm)
    for fixed, term in zip(tie, (used, pk)):
        md.Add(term == fixed)
    md.Minimize(terms[len(tie)])


def _add_words(md, m, n, k, pm, pn, pk, cm, cn, ck):
    a_own = md.NewIntVar(0, m, "a_own_floor")
    md.AddDivisionEquality(a_own, cm, pn)
    b_own = md.NewIntVar(0, n, "b_own_floor")
    md.AddDivisionEquality(b_own, cn, pm)
    a_recv = md.NewIntVar(0, m, "a_recv_rows")
    md.Add(a_recv == cm - a_own)
    b_recv = md.NewIntVar(0, n, "b_recv_cols")
    md.Add(b_recv == cn - b_own)
    wa = _prod(md, a_recv, ck, m * k, "words_a")
    wb = _prod(md, b_recv, ck, n * k, "words_b")
    c_block = _prod(md, cm, cn, m * n, "c_block")
    c_piece = _ceil_div(md, c_block, pk, m * n, "c_piece")
    pk1 = md.NewIntVar(0, k, "pk_minus_1")
    md.Add(pk1 == pk - 1)
    wc = _prod(md, c_piece, pk1, m * n * k, "words_c")
    words = md.NewIntVar(0, m * k + n * k + (m + k) * n, var_name("words"))
    md.Add(words == wa + wb + wc)
    return words


def _more_than_one(md, x, name: str):
    """A 0/1 variable equal to [x > 1]."""
    b = md.NewBoolVar(name)
    md.Add(x >= 2).OnlyEnforceIf(b)
    md.Add(x <= 1).OnlyEnforceIf(b.Not())
    return b


def _add_memory(md, memory, m, n, k, pm, pn, pk, cm, cn, ck, rounds) -> None:
    if memory is None:
        md.Add(rounds == 1)
        return
    a_piece = _ceil_div(md, cm, pn, m, "a_piece_rows")
    b_piece = _ceil_div(md, cn, pm, n, "b_piece_cols")
    c_block = _prod(md, cm, cn, m * n, "c_block_mem")
    c_piece = _ceil_div(md, c_block, pk, m * n, "c_piece_mem")
    c_acc = _prod(md, c_block, _more_than_one(md, pk, "c_reduced"), m * n, "c_acc_mem")
    a_rows = _prod(md, cm, _more_than_one(md, pn, "a_gathered"), m, "a_panel_rows")
    b_cols = _prod(md, cn, _more_than_one(md, pm, "b_gathered"), n, "b_panel_cols")
    slab = _ceil_div(md, ck, rounds, k, "slab")
    terms = [_prod(md, a_piece, ck, m * k, "mem_a"), _prod(md, b_piece, ck, n * k, "mem_b"),
             c_acc, c_piece,
             _prod(md, _sum(md, a_rows, b_cols, m + n), slab,
                   (m + n) * k, "mem_panels")]
    md.Add(sum(terms) <= memory)


def _sum(md, a, b, hi: int):
    v = md.NewIntVar(0, hi, "panel_rows_plus_cols")
    md.Add(v == a + b)
    return v
