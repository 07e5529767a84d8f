"""Access function vectors, SOAP conditions and domain sampling (sections 5.3, 5.5).

Each array subscript of a statement becomes a :class:`Component`: per array
dimension the iteration variables with their integer coefficients and the
constant offset (the translation ``t_k`` of section 5.3), plus the *version*
variables — enclosing loops along which the element is rewritten (section
5.5.2).  :func:`check_conditions` reports, per statement, each SOAP condition
as satisfied, projected (section 5.5) or violated.
"""

from __future__ import annotations

import math
from typing import Literal
from dataclasses import dataclass

import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Access, Program, Statement, sym
from meshplan.models.soap.symbolic import simplified

__all__ = ["SoapViolation", "Component", "Finding", "components", "check_conditions",
           "sample_iterations", "elements"]


class SoapViolation(ModelError):
    """The program is outside SOAP and no projection of section 5.5 applies."""

    def __init__(self, message: str, *, condition: str, statement: str | None = None,
                 param: str | None = None) -> None:
        self.condition = condition
        self.statement = statement
        where = f"statement {statement}: " if statement else ""
        super().__init__(f"{where}SOAP condition {condition} violated: {message}", param=param)


@dataclass(frozen=True, slots=True)
class Component:
    """One access ``A[φ(ψ)]`` of a statement, decomposed (section 5.3, items 5-6).

    ``dims[d]`` is a tuple of ``(var, coeff)`` for the variables of array
    dimension d (empty: a constant subscript; two or more: a non-injective
    dimension, section 5.5.3); ``offsets[d]`` its constant part (divided by
    the coefficient for single-variable dimensions) and ``residues[d]`` the
    constant modulo that coefficient.  ``role`` is ``out`` (the written
    element), ``self`` (a read of the statement's own output array) or
    ``read``.  ``version`` lists the loops along which the read element is
    rewritten (section 5.5.2); ``order`` is the statement's position.
    """

    stmt: str
    order: int
    array: str
    role: str
    access: Access
    dims: tuple[tuple[tuple[str, sp.Expr], ...], ...]
    offsets: tuple[sp.Expr, ...]
    residues: tuple[sp.Expr, ...]
    version: tuple[str, ...]

    @property
    def vars(self) -> tuple[str, ...]:
        """The loop variables the component's index expressions use, in order of first appearance."""
        out: list[str] = []
        for d in self.dims:
            for v, _ in d:
                if v not in out:
                    out.append(v)
        return tuple(out)

    @property
    def single(self) -> bool:
        """Every dimension uses at most one variable (an injective access)."""
        return all(len(d) <= 1 for d in self.dims)


@dataclass(frozen=True, slots=True)
class Finding:
    """The verdict on one SOAP condition of one statement: it holds, holds after projection, or fails."""

    statement: str
    condition: str
    status: Literal["ok", "projected", "violated"]
    message: str


def _decompose(expr: sp.Expr, loopvars: set[str], st: Statement, acc: Access):
    """``expr = Σ c_v·v + const`` with c_v free of loop variables, or a violation."""
    expr = sp.expand(expr)
    lsyms = {sym(v) for v in loopvars}
    terms: dict[str, sp.Expr] = {}
    const = sp.Integer(0)
    for t in sp.Add.make_args(expr):
        vs = t.free_symbols & lsyms
        if not vs:
            const += t
            continue
        if len(vs) > 1 or not t.is_polynomial(*vs) or sp.degree(t, next(iter(vs))) != 1:
            raise SoapViolation(f"subscript {acc} is not affine in the iteration variables (term {t}); "
                                "access components must be injective affine functions (item 5)",
                                condition="5", statement=st.name)
        v = next(iter(vs))
        coeff = simplified(t / v)
        if coeff.free_symbols & lsyms:
            raise SoapViolation(f"subscript {acc} is not affine", condition="5", statement=st.name)
        terms[str(v)] = terms.get(str(v), 0) + coeff
    if expr.has(sp.floor, sp.Min, sp.Max, sp.Mod):
        raise SoapViolation(f"subscript {acc} uses floor/min/max/mod: not an injective affine access (item 5)",
                            condition="5", statement=st.name)
    dims = tuple(sorted((v, c) for v, c in terms.items() if c != 0))
    if len(dims) == 1 and dims[0][1].is_Integer and const.is_Integer and abs(int(dims[0][1])) > 1:
        c = int(dims[0][1])
        return dims, sp.Integer(int(const) // c), sp.Integer(int(const) % c)
    return dims, const, sp.Integer(0)


def _span(st: Statement, var: str) -> int | None:
    """max − min of ``var``'s values when its loop range has constant bounds (else ``None``)."""
    for lp in st.loops:
        if lp.var == var:
            if lp.lower.free_symbols or lp.upper.free_symbols:
                return None
            n = math.ceil((int(lp.upper) - int(lp.lower)) / lp.step)
            return max(0, n - 1) * abs(lp.step)
    return None


def stride_injective(dim, st: Statement) -> bool:
    """A dimension ``Σ c_v·v`` is injective on the domain by mixed radix (section 5.5.3, case 1).

    Sorted by ``|c_v|``, every coefficient must exceed the largest value the
    smaller terms can span, ``|c_k| > Σ_{i<k} |c_i|·span(v_i)``; the smaller
    variables need loop ranges of constant length.  ``σ·w + r`` with ``r`` in
    ``range(σ)`` is the thesis's ``σ_w ≥ |D^r|``: then
    ``|φ[H]| = |D^w|·|D^r|``.
    """
    if len(dim) < 2 or any(not (c.is_Integer and c != 0) for _, c in dim):
        return False
    terms = sorted(dim, key=lambda vc: abs(int(vc[1])))
    reach = 0
    for k, (v, c) in enumerate(terms):
        if k and abs(int(c)) <= reach:
            return False
        if k < len(terms) - 1:
            span = _span(st, v)
            if span is None:
                return False
            reach += abs(int(c)) * span
    return True


def _splittable(program: Program, array: str, pos: int, expr: sp.Expr) -> bool:
    """Every access to the never-written ``array`` uses ``expr`` at dimension ``pos``: the
    dimension can be re-indexed by its variables (one bijection for all accesses)."""
    if program.writers(array):
        return False
    for s in program.statements:
        for a in s.inputs:
            if a.array == array and (len(a.index) <= pos or sp.expand(a.index[pos] - expr) != 0):
                return False
    return True


def components(program: Program, st: Statement, order: int) -> list[Component]:
    """The decomposed output and reads of statement ``st``.

    A read dimension that is injective by stride (:func:`stride_injective`)
    of an input array read everywhere with that same subscript is split into
    one dimension per variable — a bijective re-indexing, so its access sets
    count ``∏ |D^v|`` rather than a bounded overlap.
    """
    loopvars = set(st.vars)
    comps: list[Component] = []
    out_vars: set[str] = set()
    accs = [("out", st.output)] + [("self" if a.array == st.output.array else "read", a) for a in st.inputs]
    decomposed = []
    for role, acc in accs:
        dims, offs, res = [], [], []
        for pos, e in enumerate(acc.index):
            d, o, r = _decompose(e, loopvars, st, acc)
            if role == "read" and stride_injective(d, st) and _splittable(program, acc.array, pos, e):
                for v, c in sorted(d, key=lambda vc: -abs(int(vc[1]))):
                    dims.append(((v, sp.Integer(1)),))
                    offs.append(sp.Integer(0))
                    res.append(sp.Integer(0))
                continue
            dims.append(d)
            offs.append(o)
            res.append(r)
        decomposed.append((role, acc, tuple(dims), tuple(offs), tuple(res)))
        if role == "out":
            out_vars = {v for d in dims for v, _ in d}
    own_version = tuple(v for v in st.vars if v not in out_vars)
    for role, acc, dims, offs, res in decomposed:
        used = {v for d in dims for v, _ in d}
        if role == "out":
            version = own_version
        else:
            vs: list[str] = []
            for w in program.writers(acc.array):
                if w.name == st.name:
                    cand = own_version
                else:  # loops around both along which w rewrites the same element
                    wout = {v for e in w.output.index for v in map(str, e.free_symbols)}
                    cand = tuple(lp.var for lp in _common_loops(st, w) if lp.var not in wout)
                # a read translated from w's output along loop u sees one version per value of
                # any version loop nested inside u (the element is rewritten only when u reaches it)
                if not _compatible(dims, w):
                    cand = ()   # w never writes an element of this shape: no versions from w
                cand = tuple(v for v in cand if _rewrites_along(dims, w, st, v))
                shifted = _shifted_vars(dims, offs, w, st)
                pos = {v: n for n, v in enumerate(st.vars)}
                cand = tuple(v for v in cand if all(pos[v] < pos.get(u, -1) for u in shifted))
                vs += [v for v in cand if v not in used and v not in vs]
            version = tuple(v for v in st.vars if v in vs)
        comps.append(Component(st.name, order, acc.array, role, acc, dims, offs, res, version))
    return comps


def _compatible(dims, w: Statement) -> bool:
    """Same rank as ``w``'s output, one variable (same coefficient) or none per dimension alike."""
    wdims = [_decompose(e, set(w.vars), w, w.output)[0] for e in w.output.index]
    if len(wdims) != len(dims):
        return False
    for d, wd in zip(dims, wdims):
        if len(d) != len(wd) or (len(d) == 1 and d[0][1] != wd[0][1]) or (len(d) > 1 and d != wd):
            return False
    return True


def _rewrites_along(dims, w: Statement, reader: Statement, v: str) -> bool:
    """``w`` rewrites the element the reader's access ``dims`` names at every step of loop ``v``
    (section 5.5.2), not only on a lower-order set.

    Between two steps of ``v`` the loops enclosing ``v`` keep the reader's values, so a dimension
    of ``w``'s output indexed by such an outer loop ``u`` meets the read element only where the
    read's subscript equals ``u`` — generically, only when the read's dimension is the same
    ``u`` with the same coefficient (a translation).  ``A[i] += A[j]`` over ``i, j, k``: between
    two steps of ``k`` only ``A[i]`` is rewritten, so the read ``A[j]`` has no version along
    ``k`` (it changes only when ``i`` passes ``j``); versions there would make χ bounded where it
    is not, and the bound would exceed the I/O of a schedule that keeps ``A`` in fast memory.
    """
    wloops = [lp.var for lp in w.loops]
    if v not in wloops:
        return True
    outer = set(wloops[:wloops.index(v)])
    wdims = [_decompose(e, set(w.vars), w, w.output)[0] for e in w.output.index]
    if len(wdims) != len(dims):
        return True
    for d, wd in zip(dims, wdims):
        for u, c in wd:
            if u in outer and (u, c) not in d:
                return False
    return True


def _shifted_vars(dims, offs, w: Statement, reader: Statement) -> set[str]:
    """Reader variables of dimensions read at a constant offset from ``w``'s output."""
    out: set[str] = set()
    wdims = [_decompose(e, set(w.vars), w, w.output) for e in w.output.index]
    if len(wdims) != len(dims):
        return out
    for d, o, (wd, wo, _) in zip(dims, offs, wdims):
        if len(d) == 1 and len(wd) == 1 and d[0][1] == wd[0][1] and simplified(o - wo) != 0:
            out.add(d[0][0])
    return out


def _common_loops(a: Statement, b: Statement):
    out = []
    for la, lb in zip(a.loops, b.loops):
        if la != lb:
            break
        out.append(la)
    return out


def check_conditions(program: Program) -> list[Finding]:
    """Each SOAP condition of section 5.3 per statement: ok, projected or violated.

    Violations raise :class:`SoapViolation` (use :func:`components` first);
    this returns the findings of a program whose accesses decompose.
    """
    out: list[Finding] = []
    for n, st in enumerate(program.statements):
        comps = components(program, st, n)
        if not st.loops:
            raise SoapViolation("the statement is not inside a loop", condition="1", statement=st.name)
        out.append(Finding(st.name, "1-4", "ok", f"loop nest of depth {len(st.loops)} over "
                           f"({', '.join(st.vars)})"))
        nonin = [c for c in comps if not c.single]
        strided = sorted({str(e) for a in st.inputs for e in a.index
                          if stride_injective(_decompose(e, set(st.vars), st, a)[0], st)})
        if nonin:
            out.append(Finding(st.name, "5", "projected",
                               f"non-injective access {nonin[0].access}: bounded overlap, a dimension "
                               "u + v takes at least max(|D^u|, |D^v|) values; χ is the max over the "
                               "cases of which is larger (section 5.5.3)"))
        elif strided:
            out.append(Finding(st.name, "5", "projected",
                               f"{', '.join(strided)}: injective by stride (each coefficient exceeds the span "
                               "of the smaller terms), counted as the product of the tile sizes "
                               "(section 5.5.3, case 1)"))
        else:
            out.append(Finding(st.name, "5", "ok", "all access components are injective"))
        by_array: dict[str, list[Component]] = {}
        for c in comps:
            by_array.setdefault(c.array, []).append(c)
        simple = True
        for arr, cs in by_array.items():
            keys = {(tuple(tuple(v for v, _ in d) for d in c.dims), c.residues) for c in cs}
            if len(keys) > 1:
                simple = False
                out.append(Finding(st.name, "6", "projected",
                                   f"array {arr} is accessed as {', '.join(sorted({str(c.access) for c in cs}))}, "
                                   "not equal up to a constant translation: disjoint sets become separate "
                                   "arrays (section 5.5.1), overlapping ones a bounded-overlap union"))
        if simple:
            out.append(Finding(st.name, "6", "ok", "every array is a simple overlap access"))
        outc = comps[0]
        same = [c for c in comps[1:] if c.array == outc.array and c.dims == outc.dims
                and c.offsets == outc.offsets]
        if same:
            out.append(Finding(st.name, "7", "projected",
                               f"{outc.access} is read and written with the same access: version dimension "
                               f"over ({', '.join(outc.version) or 'none'}) offset by 1 (section 5.5.2)"))
        else:
            out.append(Finding(st.name, "7", "ok", "inputs are disjoint from the output or offset from it"))
    return out


# -- sampled iteration domains (for the disjointness test of section 5.5.1) --

def sample_iterations(st: Statement, params: dict[str, int], limit: int = 4000):
    """Iteration vectors of ``st`` at concrete ``params`` (the first ``limit``)."""
    fns = []
    prev: list[sp.Symbol] = []
    psyms = [sym(p) for p in params]
    for lp in st.loops:
        args = prev + psyms
        fns.append((sp.lambdify(args, lp.lower, "math"), sp.lambdify(args, lp.upper, "math"), lp.step))
        prev = prev + [lp.symbol]
    pvals = [params[p] for p in params]
    out: list[tuple[int, ...]] = []

    def rec(depth: int, vec: list[int]) -> None:
        if len(out) >= limit:
            return
        if depth == len(fns):
            out.append(tuple(vec))
            return
        lo_f, hi_f, step = fns[depth]
        lo, hi = int(math.floor(lo_f(*vec, *pvals))), int(math.ceil(hi_f(*vec, *pvals)))
        for v in range(lo, hi, step):
            rec(depth + 1, vec + [v])
            if len(out) >= limit:
                return

    rec(0, [])
    return out


def elements(comp: Component, st: Statement, iters, params: dict[str, int]) -> set[tuple]:
    """Array elements (with version-loop values appended) that ``comp`` touches."""
    f = sp.lambdify([lp.symbol for lp in st.loops] + [sym(p) for p in params],
                    list(comp.access.index) + [sym(v) for v in comp.version], "math")
    pv = [params[p] for p in params]
    return {tuple(int(x) for x in (f(*it, *pv) if (comp.access.index or comp.version) else ()))
            for it in iters}
