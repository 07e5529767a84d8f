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

import sympy as sp

from meshplan.models.counting.domains import Domain
from meshplan.solvers.counting.islsets import isl_set, isl_text
from meshplan.solvers.counting.qpsym import condition, qp_sym, readable, vanishes
from meshplan.solvers.counting.qptext import Region, qp_text, set_text, zero_on

__all__ = ["is_available", "Cases", "card", "count_domains", "isl_text", "qp_text", "SharedPrinter"]

try:
    import islpy as _isl

    _DIV = _isl.dim_type.div
except ImportError:  # is_available() says so
    _DIV = None


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
    use.  :attr:`text` is isl's own text of the count (``pw``), printed on first use."""

    __slots__ = ("_pw", "_text", "_pieces", "_names", "_covers", "_rows", "_sym", "qp")

    def __init__(self, pw, pieces: list, names: list, covers: bool) -> None:
        self._pw, self._text = pw, None
        self._pieces, self._names, self._covers = pieces, names, covers  # [(qp, domain, rows text)]
        self._rows = None
        self._sym = None
        #: the count as one isl quasi-polynomial when one piece holds everywhere (else None)
        self.qp = pieces[0][0] if len(pieces) == 1 and covers else None

    # -- text, straight from isl --------------------------------------------------------------------
    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._pw.to_str()
        return self._text

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


def _extends(qp, rest: Region, names: list) -> bool:
    """True when ``qp`` is 0 on ``rest``: shown by isl (:func:`zero_on`), or where isl can neither show nor
    refute it, by sympy (:func:`vanishes`)."""
    zero = zero_on(qp, rest)
    if zero is None:
        return vanishes(readable(qp_sym(qp, names)), rest.set, names)
    return zero


def _cases(pw, names: list, context, seen: "_Seen") -> Cases | None:
    """isl's pieces of ``pw`` (a count over the parameter set ``context``) as :class:`Cases`: conditions gisted
    against the context; a piece that is 0 wherever no piece holds is extended there (``n*(n - 1)/2``
    instead of cases).  None when a piece is infinite (the domain is unbounded there).  ``seen``: what isl
    derived from the sets of the program's earlier statements, reused where a set is the same."""
    got = pw.get_pieces()
    if any(qp.is_infty() or qp.is_neginfty() for _, qp in got):
        return None
    pieces, covers = [], False
    for dom, qp in got:
        dom, universe = seen.get(seen.gists, dom, lambda d: _gisted(d, context))
        covers = covers or universe  # the piece holds on all of the context: nothing is left
        if dom is not None:
            pieces.append((qp, dom, qp_text(qp, names)))
    if not pieces:
        return Cases(pw, [], names, False)
    rest = None if covers else seen.get(seen.rests, pw.domain(), lambda d: _rest(d, context, seen))
    if rest is not None:
        k = next((i for i, (qp, _, _) in enumerate(pieces) if _extends(qp, rest, names)), None)
        if k is not None:
            pieces = [p for i, p in enumerate(pieces) if i != k] + [pieces[k]]
            covers = True
    return Cases(pw, pieces, names, covers or rest is None)


class _Seen:
    """Per program, the sets isl has simplified (``gists``: a piece's domain -> :func:`_gisted`), the
    complements of the counts' domains (``rests``: -> :func:`_rest`) and the :class:`Region` objects built
    (``regions``), found again by isl's plain equality (the same set, the same representation: the same
    answers)."""

    def __init__(self) -> None:
        self.gists: list = []
        self.rests: list = []
        self.regions: list = []

    @staticmethod
    def get(items: list, s, make):
        for x, v in items:
            if x.plain_is_equal(s):
                return v
        v = make(s)
        items.append((s, v))
        return v


def _gisted(dom, context) -> tuple:
    """``dom`` gisted against ``context`` (its integer divisions computed) or None when it is empty, and
    whether it is all of the context."""
    dom = dom.gist(context)
    universe = dom.plain_is_universe()
    bss = dom.get_basic_sets()
    if not bss:
        return None, universe
    if any(bs.dim(_DIV) for bs in bss):
        dom = dom.compute_divs()
    return dom, universe


def _rest(domain, context, seen: _Seen) -> Region | None:
    """The :class:`Region` where no piece of a count over ``domain`` holds; None when the pieces cover the
    context."""
    rest = context.subtract(domain)
    if rest.is_empty():
        return None
    return seen.get(seen.regions, rest, Region)


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
    never stops for some parameter values).  Statements with the same domain (the same counters and
    conditions: ``for i in range(k)`` three times in one loop) share one count.  (The total is the sum of
    these: adding them in isl multiplies the pieces.)"""
    names = list(params)
    context = _context(tuple(params), procs)
    out: dict = {}
    counted: list = []  # (the walker's domain, its count) of this program's statements
    seen = _Seen()
    for name, dom in domains.items():
        got = next((c for q, c in counted if dom.quasi is not None and q == dom.quasi), None)
        if got is None:
            got = _cases(card(isl_set(dom, params, procs)).coalesce(), names, context, seen)
            if got is None:
                return None
            counted.append((dom.quasi, got))
        out[name] = got
    return out
