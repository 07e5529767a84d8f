"""Access terms as posynomials, and the identity of an exponent LP (sections 5.4.2, 5.4.3, 5.4.5).

Each access term of problem (5.8) is bounded below by a posynomial — Lemma 5.3 by ``∏|D|``, Corollary 5.1
by the mean of its leading monomials ``t_i ∏_{k≠i} |D_k|`` — whose monomials are the rows of the exponent
LP of :mod:`meshplan.solvers.soap.relax`.  Their tables and the order constraints of a max case get
interned numbers, so that the LPs, their duals and the relaxations are cached by structure
(:func:`lp_key`) without hashing exponents again.

The problems here are single cases (:func:`meshplan.models.soap.cases.split_cases`): one variable per
side, no unions.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

from meshplan.models.soap.sdg import SubProblem, Term

__all__ = ["posynomial", "monomials", "access_coefficients", "access_key_ids", "lp_key", "structure", "cached", "CACHE_LIMIT"]


def _sides(vs: tuple[str, ...]) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """A box side as a monomial (one variable; a max must be split into cases first)."""
    if not vs:
        return [(Fraction(1), {})]
    if len(vs) > 1:
        raise ValueError(f"side max({', '.join(vs)}): split the max cases first (models.soap.cases)")
    return [(Fraction(1), {vs[0]: Fraction(1)})]


def _mul(a, b):
    return [(ca * cb, _add(ea, eb)) for ca, ea in a for cb, eb in b]


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def posynomial(term: Term) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """Monomials ``c·∏ D^e`` whose sum is ≤ the term's size for all |D| ≥ t̂."""
    def box(dims):
        out = [(Fraction(1), {})]
        for d in dims:
            out = _mul(out, _sides(d))
        return out

    if term.kind == "union":
        raise ValueError(f"union term {term.array}: split the max cases first (models.soap.cases)")
    if term.kind == "pair":     # |part 1| + |part 2|/2 (models/soap/coincide.py)
        return box(term.parts[0]) + [(c / 2, e) for c, e in box(term.parts[1])]
    sides = [_sides(d) for d in term.dims]
    t = list(term.t)
    if term.kind == "inout":
        sides.append([(Fraction(1), {v: Fraction(1) for v in term.version})])
        t.append(term.t_version)
        act = [i for i, ti in enumerate(t) if ti > 0]
        out = []
        for i in act:   # ∏s - ∏(s-t) ≥ t_i ∏_{k≠i} s_k for every i, so ≥ their mean
            mon = [(Fraction(t[i], len(act)), {})]
            for k, sd in enumerate(sides):
                if k != i:
                    mon = _mul(mon, sd)
            out += mon
        return out
    out = [(Fraction(1), {})]
    for sd in sides:
        out = _mul(out, sd)
    return out   # Lemma 5.3: ≥ ∏ s


def cached(store: dict, key, compute):
    """``store[key]``, computed on a miss; a store past :data:`CACHE_LIMIT` entries is emptied first."""
    if key not in store:
        if len(store) > CACHE_LIMIT:
            store.clear()
        store[key] = compute()
    return store[key]


CACHE_LIMIT = 8192


def monomials(problem: SubProblem) -> dict[tuple, Fraction]:
    """The access monomials ``∏ D^e`` of the problem's terms and their coefficients (shared: read only)."""
    return structure(problem)[0]


def lp_key(problem: SubProblem, work_cls) -> tuple:
    """The identity of one exponent LP: the problem's classes, access monomials (by an interned number)
    and order constraints, and the work monomial."""
    _, monos_id, constraints_id = structure(problem)
    return (problem.classes, monos_id, constraints_id, tuple(work_cls))


def structure(problem: SubProblem) -> tuple[dict, int, int]:
    """``(access monomials, their number, the order constraints' number)`` of ``problem``, looked up by
    the object itself (a frozen value, asked for thousands of times per program) before its terms and
    constraints are hashed again (hashing their ``Fraction`` exponents dominated the lookups)."""
    got = _BY_OBJECT.get(id(problem))
    if got is not None and got[0] is problem:
        return got[1]
    monos, monos_id = _monomials_of(problem.terms)
    out = (monos, monos_id, _intern(_CONSTRAINT_IDS, problem.constraints))
    if len(_BY_OBJECT) > CACHE_LIMIT:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(problem)] = (problem, out)   # the entry holds the object, so its id is not reused
    return out


_BY_OBJECT: dict[int, tuple] = {}


#: access-monomial tables and order constraints → a number (the cache keys hold the number, so a
#: lookup does not hash the exponents again); numbers are never reused (the caches keyed by them
#: stay right when a table is cleared)
_MONO_IDS: dict[tuple, int] = {}
_CONSTRAINT_IDS: dict[tuple, int] = {}
_NEXT_ID = itertools.count()


def _intern(table: dict, value: tuple) -> int:
    got = table.get(value)
    if got is None:
        if len(table) > 65536:
            table.clear()
        got = table[value] = next(_NEXT_ID)
    return got


@functools.lru_cache(maxsize=8192)
def _monomials_of(terms: tuple) -> tuple[dict[tuple, Fraction], int]:
    """The access monomials of ``terms`` and their table's number.  Summed by each monomial's interned
    number (:func:`_keyed`) and the table looked up by those numbers and the coefficients' integer
    parts, so that a table seen before (the max cases of one subgraph share most) is neither built nor
    hashed again: hashing ``Fraction`` exponents dominated the unboundedness test of many-case programs."""
    acc: dict[int, list] = {}
    for term in terms:
        for c, key, kid in _keyed(term):
            got = acc.get(kid)
            if got is None:
                acc[kid] = [key, c]
            else:
                got[1] = got[1] + c
    sig = tuple((kid, c.numerator, c.denominator) for kid, (_, c) in acc.items())
    table = _intern(_MONO_IDS, sig)
    monos = _TABLES.get(table)
    if monos is None:
        if len(_TABLES) > CACHE_LIMIT:
            _TABLES.clear()
            _COEFFS.clear()
            _KIDS.clear()
        monos = _TABLES[table] = {key: c for key, c in acc.values()}
        _COEFFS[table] = [c for key, c in acc.values() if key]
        _KIDS[table] = [kid for kid, (key, _) in acc.items() if key]
    return monos, table


def access_key_ids(problem: SubProblem) -> list[int]:
    """The numbers of the access monomials' exponent keys (``e ≠ 0``), in the table's order (read only):
    equal keys have equal numbers, so caches keyed by them need not hash the exponents."""
    table = structure(problem)[1]
    got = _KIDS.get(table)
    if got is None:      # (its table was cleared: number the keys again; a key keeps its number)
        got = _KIDS[table] = [_KEY_IDS[k] for k in monomials(problem) if k]
    return got


#: per table number, :func:`access_key_ids`
_KIDS: dict[int, list[int]] = {}


def access_coefficients(problem: SubProblem) -> list[Fraction]:
    """The coefficients of the access monomials ``∏ D^e`` with ``e ≠ 0``, in the table's order — the order
    of an exponent LP's ``keys`` (shared: read only; no exponent key is hashed to look them up)."""
    table = structure(problem)[1]
    got = _COEFFS.get(table)
    if got is None:      # (its table was cleared: rebuild from the monomials)
        got = _COEFFS[table] = [c for k, c in monomials(problem).items() if k]
    return got


#: per table number, :func:`access_coefficients`
_COEFFS: dict[int, list[Fraction]] = {}


#: access-monomial tables by their number (shared, read only)
_TABLES: dict[int, dict[tuple, Fraction]] = {}
#: exponent keys → a number (:func:`_keyed`; never cleared, so one key has one number: a program has few)
_KEY_IDS: dict[tuple, int] = {}


@functools.lru_cache(maxsize=65536)
def _keyed(term: Term) -> tuple[tuple[Fraction, tuple, int], ...]:
    """``term``'s posynomial with each exponent dict as a sorted key and the key's interned number, once
    per term (the max cases of one program share most of their terms: deriche's 1 372 cases have far
    fewer distinct ones)."""
    out = []
    for c, e in posynomial(term):
        key = tuple(sorted((k, v) for k, v in e.items() if v != 0))
        out.append((c, key, _KEY_IDS.setdefault(key, len(_KEY_IDS))))
    return tuple(out)
