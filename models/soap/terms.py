"""Access terms of the dominator set (Lemma 5.3, Corollary 5.1, section 5.5).

A :class:`Term` is one array's contribution to ``Σ_j |A_j|`` of a (subgraph)
statement; :func:`input_terms` groups the reads of one input array into
simple-overlap groups and decides, per pair of groups, between separate arrays
(section 5.5.1, or the triangular pair of section 4.6.2) and a bounded-overlap
union.
"""

from __future__ import annotations

import functools
import itertools
from typing import Literal
from dataclasses import dataclass

import sympy as sp

from meshplan.models.soap.access import Component, elements, sample_iterations
from meshplan.models.loops.program import Program, Statement, sym
from meshplan.models.soap.symbolic import simplified

__all__ = ["Term", "tile_symbol", "box", "input_terms", "merge_writers", "undominated", "UnionFind", "access_text"]


def tile_symbol(cls: str) -> sp.Symbol:
    """``|D^v|`` of tile variable ``v``: a positive real symbol ``D_v``."""
    return sp.Symbol(f"D_{cls}", positive=True)


#: an input access set (Lemma 5.3), an input-output access set of a versioned array (Corollary 5.1),
#: a union of boxes (bounded overlap, section 5.5.3), or a triangular pair read by rows that may coincide
#: (section 4.6.2; :mod:`meshplan.models.soap.coincide`)
TermKind = Literal["input", "inout", "union", "pair"]


@dataclass(frozen=True, slots=True)
class Term:
    """One access term of the dominator set of a (subgraph) statement.

    ``kind``: ``input`` (Lemma 5.3), ``inout`` (Corollary 5.1, with the fused
    version dimension ``version`` and its offset count ``t_version``) or
    ``union`` (bounded overlap of ``parts``: at least the largest part) or
    ``pair`` (the two boxes ``parts`` of a triangular pair whose rows may coincide: at least
    ``|part 1| + |part 2|/2``, :mod:`meshplan.models.soap.coincide`; ``dims`` then lists their sides).
    ``dims`` are the tile variables of each box dimension (more than one: a
    non-injective dimension with at least max |D^v| distinct values, section
    5.5.3) and ``t`` the offset counts |t̂^i|.
    """

    array: str
    kind: TermKind
    dims: tuple[tuple[str, ...], ...]
    t: tuple[int, ...]
    version: tuple[str, ...] = ()
    t_version: int = 0
    parts: tuple[tuple[tuple[str, ...], ...], ...] = ()
    label: str = ""
    #: groups of ``parts`` (indices) that are separate arrays among themselves (the triangular pair of
    #: section 4.6.2, the lower-order overlap of 5.5.1): the union holds at least each group's sum, and
    #: ``size`` is the largest sum.  A max of sums is no case of monomial order constraints, so the max
    #: cases (and the integer tiles) bound it by the largest single part (valid, weaker);
    #: :mod:`meshplan.solvers.soap.groups` uses the sums where the parts fall into statements that share
    #: no tile variable.
    sums: tuple[tuple[int, ...], ...] = ()
    #: of a union: the triangular pairs among ``parts`` read by one statement (index pairs, section 4.6.2);
    #: ``coincide`` the one whose rows may coincide, as (shrunk part, kept part)
    #: (:mod:`meshplan.models.soap.coincide`; :mod:`meshplan.solvers.soap.groups` uses it as a ``pair`` term)
    tri: tuple[tuple[int, int], ...] = ()
    coincide: tuple[int, ...] = ()

    def size(self, D: dict[str, sp.Expr]) -> sp.Expr:
        """The access-set lower bound as an expression of the tile sizes ``D``."""
        def side(vs: tuple[str, ...]) -> sp.Expr:
            if not vs:
                return sp.Integer(1)
            if len(vs) == 1:
                return D[vs[0]]
            return sp.Max(*[D[v] for v in vs])  # ≤ #distinct values of a linear g (section 5.5.3)

        if self.kind == "pair":    # rows of P pairs, |I| of them kept: ≥ P/|I| + |I|/2 (models/soap/coincide.py)
            return sp.Mul(*[side(d) for d in self.parts[0]]) + sp.Mul(*[side(d) for d in self.parts[1]]) / 2
        if self.kind == "union":   # ≤ |union|: its largest sum group (a part alone without sums)
            groups = self.sums or tuple((n,) for n in range(len(self.parts)))
            return sp.Max(*[sp.Add(*[sp.Mul(*[side(d) for d in self.parts[n]]) for n in g]) for g in groups])
        s = [side(d) for d in self.dims]
        t = list(self.t)
        if self.kind == "inout":
            s.append(sp.Mul(*[D[v] for v in self.version]))
            t.append(self.t_version)
            return sp.expand(sp.Mul(*s) - sp.Mul(*[a - b for a, b in zip(s, t)]))
        if not any(t):
            return sp.Mul(*s)
        return sp.expand(2 * sp.Mul(*s) - sp.Mul(*[a - b for a, b in zip(s, t)]))

    def __str__(self) -> str:
        def box(dims):
            return "×".join("+".join(d) if d else "1" for d in dims) or "1"
        if self.kind == "union":
            groups = self.sums or tuple((n,) for n in range(len(self.parts)))
            return f"{self.array}: overlap of " + ", ".join(" + ".join(box(self.parts[n]) for n in g) for g in groups)
        if self.kind == "pair":
            return f"{self.array}: coinciding pair {box(self.parts[0])} + {box(self.parts[1])}/2"
        v = f", version ({'·'.join(self.version) or '1'}) t={self.t_version}" if self.kind == "inout" else ""
        return f"{self.array}: {self.kind} {box(self.dims)} t={list(self.t)}{v}"


class UnionFind:
    """A union-find over hashable items (tile variables that must take equal tile sizes; the webs of
    :func:`meshplan.models.soap.scalars.split_webs`)."""

    def __init__(self, items=()):
        self.p = {x: x for x in items}

    def find(self, x):
        """The representative of ``x`` (with path halving; an item not seen before is its own set)."""
        self.p.setdefault(x, x)
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return self.p[x]

    def union(self, a, b):
        """Merge the sets of ``a`` and ``b``."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.p[rb] = ra


class _TileSymbols(dict):
    """``class → |D^class|`` for any class (the symbols :func:`tile_symbol` names)."""

    def __missing__(self, cls: str) -> sp.Symbol:
        return tile_symbol(cls)


@functools.lru_cache(maxsize=8192)
def default_size(term: Term) -> sp.Expr:
    """``term.size`` in the tile symbols of its classes, once per term (subgraphs share most terms)."""
    return term.size(_TileSymbols())


def box(group, dims_classes, version=()):
    """Distinct box dimensions (by variables) and offset counts |t̂| over a group.

    ``version`` (input arrays rewritten by a loop outside ``H``) adds one box
    dimension per version loop: each iteration reads another version.
    """
    keyed: dict[tuple, list[int]] = {}
    for d, cls in enumerate(dims_classes):
        keyed.setdefault(cls, []).append(d)
    dims, t = [], []
    for cls, idx in keyed.items():
        offs = {tuple(simplified(c.offsets[d]) for d in idx) for c in group}
        dims.append(cls)
        t.append(len(offs) - 1)
    used = {v for cls in keyed for v in cls}
    for v in dict.fromkeys(version):
        if v not in used:
            dims.append((v,))
            t.append(0)
    return tuple(dims), tuple(t)


def input_terms(arr, cs, classes_of, uf, prog: Program, sample_size: int, notes: list[str]):
    """The access terms of input array ``arr`` from its components ``cs`` (Lemma 5.3; a union of boxes when
    accesses overlap boundedly, section 5.5.3)."""
    groups: list[list[Component]] = []
    for c in cs:
        key = (classes_of(c), tuple(uf.find(v) for v in c.version), c.residues)
        for g in groups:
            g0 = g[0]
            if key == (classes_of(g0), tuple(uf.find(v) for v in g0.version), g0.residues):
                g.append(c)
                break
        else:
            groups.append([c])
    def vers(c):
        return tuple(uf.find(v) for v in c.version)

    if len(groups) == 1:
        dims, t = box(groups[0], classes_of(groups[0][0]), vers(groups[0][0]))
        return [Term(arr, "input", dims, t, label=access_text(groups[0][0].access))]
    # pairwise overlap (sampled), union-find over overlapping groups
    params = {p: sample_size for p in prog.params}
    sets = []
    for g in groups:
        s: set[tuple] = set()
        for c in g:
            s |= _touched(c, prog.statement(c.stmt), tuple(params.items()))
        sets.append(s)
    guf = UnionFind(range(len(groups)))
    apart: set[tuple[int, int]] = set()     # pairs counted as two arrays
    # triangular pairs (section 4.6.2) count as two arrays only where no third group of the array joins
    # them into one union: inside a union their sum is not a valid access size.  covariance's
    # data[k, i], data[k, j] with the mean's data[i, j] summed the pair to the published M²N/√S, which
    # the triangle-block schedule (Beaumont et al., SPAA 2022) beats at large sizes (docs/bound.md).
    tri: set[tuple[int, int]] = set()
    for a, b in itertools.combinations(range(len(groups)), 2):
        ga, gb = groups[a][0], groups[b][0]
        if len(ga.version) != len(gb.version) or not (sets[a] & sets[b]):
            continue
        lower = _lower_order(groups[a], groups[b], prog, sample_size)
        if lower is not None:
            notes.append(f"{ga.stmt}: {access_text(ga.access)} and {access_text(gb.access)} overlap only on the lower-order set "
                         f"{lower}: counted as two disjoint arrays (section 5.5.1, as for LU)")
            apart.add((a, b))
            continue
        if _triangular(ga, gb, prog):
            tri.add((a, b))
            continue
        guf.union(a, b)
    for a, b in sorted(tri):
        ga, gb = groups[a][0], groups[b][0]
        pair = f"{ga.stmt}: {access_text(ga.access)} and {access_text(gb.access)} overlap only on the diagonal of a triangular domain"
        if guf.find(a) == guf.find(b):
            notes.append(f"{pair}, and another access of {arr} overlaps both: one union (section 5.5.3), not two arrays")
            continue
        notes.append(f"{pair}: counted as two arrays (section 4.6.2)")
        apart.add((a, b))
    merged: dict[int, list[int]] = {}
    for k in range(len(groups)):
        merged.setdefault(guf.find(k), []).append(k)
    terms = []
    for ks in merged.values():
        if len(ks) == 1:
            g = groups[ks[0]]
            dims, t = box(g, classes_of(g[0]), vers(g[0]))
            terms.append(Term(arr, "input", dims, t, label=access_text(g[0].access)))
            if len(groups) > 1:
                notes.append(f"{g[0].stmt}: {arr} accesses {access_text(g[0].access)} are disjoint from the other "
                             "accesses: a separate array (section 5.5.1)")
        else:
            parts = tuple(box(groups[k], classes_of(groups[k][0]), vers(groups[k][0]))[0] for k in ks)
            terms.append(Term(arr, "union", (), (), parts=parts,
                              label=" ∪ ".join(access_text(groups[k][0].access) for k in ks),
                              sums=_sum_groups(ks, apart),
                              tri=tuple((ks.index(a), ks.index(b)) for a, b in sorted(tri) if a in ks and b in ks)))
            notes.append(f"{arr}: overlapping accesses {', '.join(access_text(groups[k][0].access) for k in ks)}: "
                         "bounded overlap, |∪| ≥ its largest part (section 5.5.3)")
    return terms


def _sum_groups(ks: list[int], apart: set[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """A partition of the union's parts (positions in ``ks``) into groups that are pairwise separate
    arrays (greedy, in order); ``()`` when every group is a single part."""
    out: list[list[int]] = []
    for n, k in enumerate(ks):
        for g in out:
            if all((min(ks[m], k), max(ks[m], k)) in apart for m in g):
                g.append(n)
                break
        else:
            out.append([n])
    return tuple(tuple(g) for g in out) if any(len(g) > 1 for g in out) else ()


@functools.lru_cache(maxsize=4096)
def access_text(acc) -> str:
    """``str(acc)`` (sympy printing), once per access: labels and notes of every subgraph use it."""
    return str(acc)


@functools.lru_cache(maxsize=8192)
def _touched(c: Component, st: Statement, params: tuple) -> frozenset:
    """The elements component ``c`` touches at the sample sizes (one sampling per component:
    the subgraphs of a program share their statements)."""
    return frozenset(elements(c, st, _iterations(st, params, 4000), dict(params)))


@functools.lru_cache(maxsize=1024)
def _iterations(st: Statement, params: tuple, limit: int) -> tuple:
    return tuple(sample_iterations(st, dict(params), limit))


def _triangular(a: Component, b: Component, prog: Program) -> bool:
    """``a`` and ``b`` differ by swapping two variables whose loop bounds are ordered."""
    if a.stmt != b.stmt or len(a.dims) != len(b.dims):
        return False
    diff = [(da, db) for da, db in zip(a.dims, b.dims) if da != db]
    if len(diff) != 1 or len(diff[0][0]) != 1 or len(diff[0][1]) != 1:
        return False
    u, v = diff[0][0][0][0], diff[0][1][0][0]
    st: Statement = prog.statement(a.stmt)
    for lp in st.loops:
        if (lp.var == v and sym(u) in (lp.lower.free_symbols | lp.upper.free_symbols)) or \
                (lp.var == u and sym(v) in (lp.lower.free_symbols | lp.upper.free_symbols)):
            return True
    return False


def _slice_elements(group, prog: Program, params: dict[str, int], limit: int):
    """Elements touched by ``group`` tagged with the values of their statement's version loops
    (the loops not indexing its output), or ``None`` when the sample was truncated."""
    out: set[tuple] = set()
    for c in group:
        part = _sliced(c, prog.statement(c.stmt), tuple(params.items()), limit)
        if part is None:
            return None
        out |= part
    return out


@functools.lru_cache(maxsize=4096)
def _sliced(c: Component, st: Statement, params: tuple, limit: int):
    """One component's part of :func:`_slice_elements` (``None`` when the sample was truncated)."""
    wout = {str(v) for e in st.output.index for v in e.free_symbols}
    slice_vars = [lp.symbol for lp in st.loops if lp.var not in wout]
    iters = _iterations(st, params, limit)
    if len(iters) >= limit:
        return None
    f = sp.lambdify([lp.symbol for lp in st.loops] + [sym(p) for p, _ in params],
                    [sp.Integer(0)] + list(c.access.index) + slice_vars, "math")
    pv = [v for _, v in params]
    return frozenset((c.stmt,) + tuple(int(x) for x in f(*it, *pv)[1:]) for it in iters)


def _lower_order(ga, gb, prog: Program, sample_size: int, limit: int = 4000):
    """The set on which two overlapping access groups of one array meet, when it is of lower order.

    Section 5.5.1 (LU): within one value of the version loops (the statement's loops that do not
    index its output) the two groups touch disjoint elements, or meet on a set whose share of the
    groups vanishes as the sizes grow (sampled at two sizes: the share falls at least like
    1/size).  Returns a description of the set (the subscripts equated) or ``None``.
    """
    if ga[0].stmt != gb[0].stmt:
        return None
    shares = []
    for n in (sample_size, 2 * sample_size):
        params = {p: n for p in prog.params}
        sa, sb = _slice_elements(ga, prog, params, limit), _slice_elements(gb, prog, params, limit)
        if sa is None or sb is None or not sa or not sb:
            return None
        shares.append(len(sa & sb) / min(len(sa), len(sb)))
    if shares[0] and shares[1] > shares[0] * 0.5 * 1.25:
        return None
    eqs = [sp.Eq(x, y) for x, y in zip(ga[0].access.index, gb[0].access.index) if simplified(x - y) != 0]
    where = ", ".join(str(e).replace("Eq(", "").replace(")", "").replace(", ", " = ") for e in eqs)
    return f"{{{where}}}" + ("" if shares[0] else " (empty within each version)")


def merge_writers(terms: list[Term], own_chain: list[bool], notes: list[str]) -> list[Term]:
    """One array's Corollary 5.1 terms of several writers' own update chains as one bounded-overlap union.

    ``terms`` start with the Corollary 5.1 terms, ``own_chain[n]`` telling whether term ``n``'s group holds
    only its writers' own accesses.  Each such term whose size is its box (no halo, one older version per
    element) counts the elements whose chain enters the tile from outside: one dominator vertex per
    element.  Two writers of one array (symm's ``C[k, j] += …`` along ``i`` and ``C[i, j] = β·C[i, j] + …``)
    write boxes that coincide when a tile's rows do, and an element's chain then enters once: the sum of
    the two terms over-counts the dominator, which shrinks the feasible set of problem (5.8) and so
    over-states the bound.  Their union has at least as many elements as its largest part (section
    5.5.3).  A term whose values another statement reads as an operand (LU's ``A[i, k]``, the column
    the trailing update reads) keeps its own term: the thesis bounds that access by the producer's
    intensity (section 4.4.2, Lemma 4.8, Corollary 4.1), as in its LU and Cholesky derivations (4.6.1,
    4.6.2).
    """
    by: dict[str, list[int]] = {}
    for n, t in enumerate(terms[:len(own_chain)]):
        if own_chain[n] and not any(t.t) and t.t_version == 1:
            by.setdefault(t.array, []).append(n)
    drop: set[int] = set()
    out = list(terms)
    for arr, ns in by.items():
        if len(ns) < 2:
            continue
        parts = undominated([terms[n].dims for n in ns])
        label = " ∪ ".join(terms[n].label for n in ns)
        out[ns[0]] = (Term(arr, "union", (), (), parts=tuple(parts), label=label) if len(parts) > 1 else
                      Term(arr, "inout", parts[0], (0,) * len(parts[0]), (), 1, label=label))
        drop |= set(ns[1:])
        notes.append(f"{arr}: written by several statements as {label}: one older version per element, "
                     "|∪| ≥ its largest part (section 5.5.3)")
    return [t for n, t in enumerate(out) if n not in drop]


def undominated(parts: list) -> list:
    """The parts of a union whose box is not a sub-box of another part's (every ``|D| ≥ 1``, so such a
    part is never the largest: the max is unchanged, and :mod:`cases` splits fewer cases)."""
    def inside(a, b) -> bool:
        rest = list(b)
        for d in a:
            if d not in rest:
                return False
            rest.remove(d)
        return True

    out = []
    for n, a in enumerate(parts):
        if any(m != n and inside(a, b) and (not inside(b, a) or m < n) for m, b in enumerate(parts)):
            continue
        out.append(a)
    return out
