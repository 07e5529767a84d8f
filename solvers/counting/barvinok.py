"""Exact counts of quasi-affine iteration domains with Barvinok's algorithm (islpy-barvinok).

Barvinok's algorithm counts the integer points of a parametric polytope as a piecewise quasi-polynomial in
the parameters (Verdoolaege, Seghir, Beyls, Loechner, Bruynooghe, "Counting integer points in parametric
polytopes using Barvinok's rational functions", Algorithmica 48(1), 2007; in isl as ``isl_set_card``).
:func:`count_domains` turns each statement's :class:`~meshplan.models.counting.domains.Domain` into an isl
set, counts it, and reads the answer back as :class:`Cases`: the pieces (a quasi-polynomial and the
parameter domain where it holds), 0 outside them (empty domains count 0), printed straight from isl
(:mod:`~meshplan.solvers.counting.qptext`); the same as sympy expressions (a ``Piecewise``) are built only
when a caller asks (:mod:`~meshplan.solvers.counting.qpsym`).  Parameters are non-negative integers (the
process count ``p`` at least 1).
"""

from __future__ import annotations

from functools import lru_cache
from math import lcm

import sympy as sp

from meshplan.models.counting.domains import Domain, linear_form
from meshplan.models.counting.quasi import isl_cond
from meshplan.solvers.counting.qpsym import condition, nonzero_at_small, qp_sym, readable, vanishes
from meshplan.solvers.counting.qptext import Region, qp_text, set_text, zero_on

__all__ = ["is_available", "Cases", "card", "count_domains", "isl_text", "qp_text", "SharedPrinter"]

try:
    import islpy as _isl

    _PARAM, _DIV, _SET = _isl.dim_type.param, _isl.dim_type.div, _isl.dim_type.set
except ImportError:  # is_available() says so
    _PARAM = _DIV = _SET = None


def _random_state():
    """The C library's ``initstate``/``setstate`` (None where they are missing), and a state buffer of its own."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        init, put = libc.initstate, libc.setstate
    except (OSError, AttributeError):
        return None
    init.restype, init.argtypes = ctypes.c_void_p, [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]
    put.restype, put.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    return init, put, ctypes.create_string_buffer(128)


_RANDOM = _random_state()


def card(s):
    """``isl_set_card`` of ``s`` (an isl set), the same text for the same set in every process: Barvinok's
    algorithm, as the barvinok library implements it, draws a vector ``lambda`` with ``lambda . r != 0`` for every
    ray ``r`` of a cone from the C library's ``random()`` (the specialization of the generating function), so
    the pieces of a count, equal in value, would be printed differently depending on what the process counted
    before.  The generator is started from one seed in a state of its own for each
    count, and the caller's state is put back afterwards."""
    if _RANDOM is None:
        return s.card()
    init, put, buf = _RANDOM
    old = init(1, buf, len(buf))
    try:
        return s.card()
    finally:
        put(old)


def is_available() -> bool:
    """True when islpy was built with Barvinok (the ``islpy-barvinok`` wheel)."""
    try:
        import islpy as isl
    except ImportError:
        return False
    return hasattr(isl.Set, "card")


class SharedPrinter:
    """sympy's str printer (terms in their own order, ``order="none"``) that prints each sub-expression object
    once: a count's pieces appear in its cases, in its ``Piecewise`` and in the total.  The text of a
    sub-expression does not depend on where it stands (the parent adds the parentheses), so the output is
    that of ``sympy.sstr(e, order="none")``."""

    def __init__(self) -> None:
        from sympy.printing.str import StrPrinter

        memo: dict = {}

        class _Printer(StrPrinter):
            def _print(self, expr, **kwargs):
                if kwargs:
                    return super()._print(expr, **kwargs)
                hit = memo.get(id(expr))
                if hit is not None and hit[0] is expr:
                    return hit[1]
                out = super()._print(expr)
                memo[id(expr)] = (expr, out)  # the reference keeps the id from being reused
                return out
        self._printer = _Printer({"order": "none"})

    def __call__(self, e: sp.Basic) -> str:
        from sympy.printing.precedence import PRECEDENCE_FUNCTIONS

        slow = PRECEDENCE_FUNCTIONS["Mul"]
        PRECEDENCE_FUNCTIONS["Mul"] = _precedence_mul
        try:
            return self._printer.doprint(e)
        finally:
            PRECEDENCE_FUNCTIONS["Mul"] = slow


def _precedence_mul(item) -> int:
    """sympy's ``precedence_Mul`` without building ``-item``: ``Mul.could_extract_minus_sign`` negates the
    product (a new sympy object, its assumptions deduced) only to rule out ``zoo*x == -zoo*x``; a leading
    number that is negative (never ``zoo`` or ``nan``) is the same answer.  Printing Barvinok's counts spent
    most of its time there."""
    from sympy.core.function import Function
    from sympy.printing.precedence import PRECEDENCE

    if any(isinstance(a, Function) and getattr(a, "precedence", PRECEDENCE["Mul"]) < PRECEDENCE["Mul"]
           for a in item.args):
        return PRECEDENCE["Mul"]
    c = item.args[0]
    neg = c.is_Number and (c.p < 0 if c.is_Rational else bool(c.is_extended_negative))
    return PRECEDENCE["Add"] if neg else PRECEDENCE["Mul"]


class Cases:
    """A piecewise quasi-polynomial, Barvinok's count of one domain: pieces with disjoint conditions on the
    parameters, 0 where none holds.  It is read from isl once, as text (:meth:`rows`, :attr:`count_text`);
    the same count as sympy expressions (:attr:`pieces`: ``(count, condition)`` pairs; :attr:`expr`: one
    expression, a plain quasi-polynomial when one piece holds for every parameter value) is built on first
    use.  ``text`` is isl's own text of the count."""

    __slots__ = ("text", "_pieces", "_names", "_covers", "_rows", "_sym", "qp")

    def __init__(self, text: str, pieces: list, names: list, covers: bool) -> None:
        self.text = text
        self._pieces, self._names, self._covers = pieces, names, covers  # [(qp, domain, rows text)]
        self._rows = None
        self._sym = None
        #: the count as one isl quasi-polynomial when one piece holds everywhere (else None)
        self.qp = pieces[0][0] if len(pieces) == 1 and covers else None

    # -- text, straight from isl --------------------------------------------------------------------
    def rows(self, printer=None) -> list[tuple[str, str]]:
        """``(count, condition)`` as text; the last piece's condition is ``otherwise`` when it was extended
        to the parameters where no piece of isl's holds (it is 0 there), else a row ``("0", "otherwise")``
        follows when the pieces do not cover every parameter value.  (``printer`` is not used.)"""
        if self._rows is None:
            ps = self._pieces
            if len(ps) == 1 and self._covers:
                out = [(ps[0][2], "True")]
            else:
                out = [(t, set_text(d, self._names)) for _, d, t in ps]
                if self._covers:
                    out[-1] = (out[-1][0], "otherwise")
                elif out:
                    out.append(("0", "otherwise"))
            self._rows = out
        return self._rows

    @property
    def count_text(self) -> str:
        """The count as one expression's text: the quasi-polynomial, or ``Piecewise((count, condition), …)``
        (sympy's syntax; it reads back with ``sympy.sympify``)."""
        rows = self.rows()
        if not rows:
            return "0"
        if len(rows) == 1 and rows[0][1] == "True":
            return rows[0][0]
        return "Piecewise(" + ", ".join(f"({e}, {'True' if c == 'otherwise' else c})" for e, c in rows) + ")"

    # -- sympy, on first use ---------------------------------------------------------------------------
    def _sympy(self):
        if self._sym is None:
            names = self._names
            pieces = [(readable(qp_sym(qp, names)), condition(d.to_str(), d, tuple(names)))
                      for qp, d, _ in self._pieces]
            if not pieces:
                self._sym = ((), sp.Integer(0))
            elif len(pieces) == 1 and self._covers:
                self._sym = (((pieces[0][0], sp.true),), pieces[0][0])
            else:
                args = list(pieces)
                if self._covers:
                    args[-1] = (args[-1][0], sp.true)
                    pieces[-1] = (pieces[-1][0], sp.Not(sp.Or(*[c for _, c in pieces[:-1]], evaluate=False),
                                                        evaluate=False))
                else:
                    args.append((sp.Integer(0), sp.true))
                self._sym = (tuple(pieces), sp.Piecewise(*args, evaluate=False))
        return self._sym

    @property
    def pieces(self) -> tuple[tuple[sp.Expr, sp.Basic], ...]:
        return self._sympy()[0]

    @property
    def expr(self) -> sp.Expr:
        return self._sympy()[1]


# -- sympy -> isl syntax ----------------------------------------------------------------------------
def _aff(e: sp.Expr) -> str:
    """A quasi-affine sympy expression in isl syntax: a linear form over atoms, ``(Σ k_a·a + k_0)/L``
    with integers ``k`` (``L`` the common denominator), atoms printed recursively."""
    lf = linear_form(e)
    if lf is None:
        raise ValueError(f"not quasi-affine: {e}")
    terms, const = lf
    den = sp.ilcm(*[c.q for c in terms.values()], const.q) if terms else const.q
    parts = [f"{int(c * den)}*{_atom(a)}" for a, c in terms.items()]
    if const != 0 or not parts:
        parts.append(str(int(const * den)))
    text = " + ".join(parts)
    return f"({text})" if den == 1 else f"(({text})/{den})"


def _atom(a: sp.Expr) -> str:
    if a.is_Symbol:
        return a.name
    if isinstance(a, (sp.floor, sp.ceiling)):
        return f"{'floor' if isinstance(a, sp.floor) else 'ceil'}({_aff(a.args[0])})"
    if isinstance(a, (sp.Min, sp.Max)):
        return f"{'min' if isinstance(a, sp.Min) else 'max'}({', '.join(_aff(x) for x in a.args)})"
    if isinstance(a, sp.Mod) and a.args[1].is_Integer:
        return f"({_aff(a.args[0])} mod {a.args[1]})"
    raise ValueError(f"not quasi-affine: {a}")


_OPS = {sp.Lt: "<", sp.Le: "<=", sp.Gt: ">", sp.Ge: ">=", sp.Eq: "=", sp.Ne: "!="}


@lru_cache(maxsize=4096)
def _cond(c: sp.Basic) -> str:
    """A constraint in isl syntax; cached, as the statements of a nest share their outer loops' constraints."""
    if c is sp.true:
        return "1 = 1"
    if c is sp.false:
        return "1 = 0"
    if isinstance(c, sp.And):
        return "(" + " and ".join(_cond(a) for a in c.args) + ")"
    if isinstance(c, sp.Or):
        return "(" + " or ".join(_cond(a) for a in c.args) + ")"
    if isinstance(c, sp.Not):
        return f"(not {_cond(c.args[0])})"
    op = _OPS.get(type(c))
    if op is None:
        raise ValueError(f"not an affine condition: {c}")
    return f"{_aff(c.lhs)} {op} {_aff(c.rhs)}"


def isl_text(dom: Domain, params: tuple[str, ...], procs: str | None = None) -> str:
    """The isl set of ``dom`` over ``params`` (all non-negative; ``procs`` at least 1)."""
    conds = [f"{q} >= {1 if q == procs else 0}" for q in params]
    if dom.quasi is not None:  # built by the walker: its conditions print directly
        conds += [isl_cond(c) for c in dom.quasi[1]]
        dims = ", ".join(dom.quasi[0])
    else:
        conds += [_cond(c) for c in dom.constraints]
        dims = ", ".join(s.name for s in dom.counters)
    return f"[{', '.join(params)}] -> {{ [{dims}] : {' and '.join(conds) or '1 = 1'} }}"


_INT_OPS = {">=": (False, 0), ">": (False, 1), "<=": (True, 0), "<": (True, 1)}


def _plain_rows(c, den_rows: list) -> bool:
    """Append ``(is_equality, {name: k}, k_0)`` (integers: ``Σ k·name + k_0 >= 0`` or ``= 0``) for the
    condition ``c`` to ``den_rows``; False when ``c`` is not one affine relation over names (an ``and``
    of them counts too): ``min``/``max``/``floor``/``mod``, ``or``, ``not`` and ``!=`` go through isl's
    parser."""
    if c is True:
        return True
    if not isinstance(c, tuple):
        return False
    if c[0] == "and":
        return all(_plain_rows(a, den_rows) for a in c[1])
    if c[0] != "rel":
        return False
    op, f = c[1], c[2]
    items = f.items() if isinstance(f, dict) else f
    den = 1
    for a, k in items:
        if not isinstance(a, str):
            return False
        if k.denominator != 1:
            den = lcm(den, k.denominator)
    row = {a: k.numerator * (den // k.denominator) for a, k in items}
    k0 = row.pop("", 0)
    if op == "=":
        den_rows.append((True, row, k0))
        return True
    if op not in _INT_OPS:
        return False
    neg, strict = _INT_OPS[op]
    if neg:
        row = {a: -k for a, k in row.items()}
        k0 = -k0
    den_rows.append((False, row, k0 - strict))  # integers: F > 0 is F - 1 >= 0
    return True


def isl_set(dom: Domain, params: tuple[str, ...], procs: str | None = None):
    """The isl set of ``dom`` (the set of :func:`isl_text`): a domain whose conditions are affine relations over
    names is built constraint by constraint, in the order of the text (isl's parser intersects its
    conjuncts in that order: the same set); others are read from their text."""
    import islpy as isl

    rows: list = []
    if dom.quasi is None or not all(_plain_rows(c, rows) for c in dom.quasi[1]):
        return isl.Set(isl_text(dom, params, procs))
    dims = list(dom.quasi[0])
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=dims, params=list(params))
    pos = {q: (_PARAM, i) for i, q in enumerate(params)}
    pos.update((x, (_SET, i)) for i, x in enumerate(dims))
    bs = isl.BasicSet.universe(space)
    ls = bs.get_local_space()
    for q in params:
        c = isl.Constraint.inequality_alloc(ls).set_coefficient_val(_PARAM, pos[q][1], 1)
        bs = bs.add_constraint(c.set_constant_val(-1) if q == procs else c)
    for eq, row, k0 in rows:
        c = (isl.Constraint.equality_alloc if eq else isl.Constraint.inequality_alloc)(ls)
        for a, k in row.items():
            if k:
                t, i = pos[a]
                c = c.set_coefficient_val(t, i, _val(k))
        bs = bs.add_constraint(c.set_constant_val(_val(k0)) if k0 else c)
    return isl.Set.from_basic_set(bs)


def _val(k: int):
    """``k`` as islpy takes it: a Python int within a C long, else an ``isl.Val`` read from its digits
    (``range(10**400)``)."""
    if -2**62 <= k < 2**62:
        return k
    import islpy as isl

    return isl.Val(str(k))


def _extends(qp, rest: Region, names: list) -> bool:
    """True when ``qp`` is 0 on ``rest``: shown by isl (:func:`_zero_on`), or where isl can neither show nor
    refute it, by sympy (:func:`_vanishes`)."""
    zero = zero_on(qp, rest)
    if zero is None:
        return not nonzero_at_small(qp, rest.set) and vanishes(readable(qp_sym(qp, names)), rest.set, names)
    return zero


def _cases(pw, names: list, context, text: str) -> Cases:
    """isl's pieces of ``pw`` (a count over the parameter set ``context``) as :class:`Cases`: conditions gisted
    against the context; a piece that is 0 wherever no piece holds is extended there (``n*(n - 1)/2``
    instead of cases)."""
    pieces, covers = [], False
    for dom, qp in pw.get_pieces():
        dom = dom.gist(context)
        covers = covers or dom.plain_is_universe()  # the piece holds on all of the context: nothing is left
        bss = dom.get_basic_sets()
        if not bss:
            continue
        if any(bs.dim(_DIV) for bs in bss):
            dom = dom.compute_divs()
        pieces.append((qp, dom, qp_text(qp, names)))
    if not pieces:
        return Cases(text, [], names, False)
    if not covers:
        rest = context.subtract(pw.domain())
        covers = rest.is_empty()
    if not covers:
        rest = Region(rest)
        k = next((i for i, (qp, _, _) in enumerate(pieces) if _extends(qp, rest, names)), None)
        if k is not None:
            pieces = [p for i, p in enumerate(pieces) if i != k] + [pieces[k]]
            covers = True
    return Cases(text, pieces, names, covers)


@lru_cache(maxsize=256)
def _context(params: tuple[str, ...], procs: str | None):
    """The parameter values counted over: every parameter non-negative, ``procs`` at least 1 (an isl set,
    immutable, shared by the nests with the same parameters)."""
    import islpy as isl

    if not params:
        return isl.Set("{ : }")
    return isl.Set(f"[{', '.join(params)}] -> {{ : " +
                   " and ".join(f"{q} >= {1 if q == procs else 0}" for q in params) + " }")


def count_domains(domains: dict[str, Domain], params: tuple[str, ...], procs: str | None = None
                  ) -> dict[str, Cases] | None:
    """Per statement the :class:`Cases` of its domain's size; None when a domain is unbounded (a loop that
    never stops for some parameter values).  (The total is the sum of these: adding them in isl multiplies
    the pieces.)"""
    import islpy as isl

    names = list(params)
    context = _context(tuple(params), procs)
    out = {}
    for name, dom in domains.items():
        pw = card(isl_set(dom, params, procs)).coalesce()
        text = pw.to_str()
        if "infty" in text:
            return None
        out[name] = _cases(pw, names, context, text)
    return out
