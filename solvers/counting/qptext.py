"""Barvinok's counts (isl piecewise quasi-polynomials) as text in sympy's syntax, read straight from isl, and
isl's test that a quasi-polynomial is 0 on a set of parameter values.

The text reads back with ``sympy.sympify``: terms by falling degree over one common denominator
(``(n**2 - n)/2``), ``floor(...)`` for isl's integer divisions, conditions as ``(m >= n + 1) & Eq(m, 1)``
(Verdoolaege et al., "Counting integer points in parametric polytopes using Barvinok's rational functions",
Algorithmica 48(1), 2007, for the counts).
"""

from __future__ import annotations

from functools import lru_cache
from math import lcm

try:
    import islpy as _isl

    _PARAM, _DIV = _isl.dim_type.param, _isl.dim_type.div
except ImportError:  # barvinok.is_available() says so
    _PARAM = _DIV = None

__all__ = ["qp_text", "set_text", "Region", "zero_on"]


def _fr(v) -> tuple[int, int]:
    """An isl value as ``(numerator, denominator)``."""
    return _fr_text(v.to_str())


def _fr_text(text: str) -> tuple[int, int]:
    """An isl value's text (``-3/2``; isl keeps values reduced, the denominator positive) as ``(numerator,
    denominator)``: one call into isl per value, exact beyond a C long."""
    num, _, den = text.partition("/")
    return int(num), int(den) if den else 1


def _sum_text(terms: list) -> str:
    """``Σ k·mono`` (``k`` as ``(numerator, denominator)``; ``mono`` text, "" for the constant) over one common
    denominator."""
    den = lcm(*[d for (_, d), _ in terms]) if terms else 1
    parts = []
    for (k, d), mono in terms:
        if k == 0:
            continue
        k = k * (den // d)
        mag = -k if k < 0 else k
        body = (mono if mag == 1 else f"{mag}*{mono}") if mono else str(mag)
        parts.append((" - " if parts else "-") + body if k < 0 else (" + " if parts else "") + body)
    body = "".join(parts) or "0"
    if den == 1:
        return body
    return f"({body})/{den}" if len(parts) > 1 else f"{body}/{den}"


def _aff_terms(aff, names: list) -> list:
    out = []
    for i, name in enumerate(names):
        c = aff.get_coefficient_val(_PARAM, i).to_str()
        if c != "0":
            out.append((_fr_text(c), name))
    for i in range(aff.dim(_DIV)):
        c = aff.get_coefficient_val(_DIV, i).to_str()
        if c != "0":
            out.append((_fr_text(c), f"floor({_sum_text(_aff_terms(aff.get_div(i), names))})"))
    out.append((_fr(aff.get_constant_val()), ""))
    return out


def qp_text(qp, names: list) -> str:
    """A quasi-polynomial's text, terms by falling degree over one denominator: ``(n**2 - n)/2``."""
    floors: dict[int, str] = {}
    terms = []
    divs = None  # the terms of a quasi-polynomial share its integer divisions
    for t in qp.get_terms():
        f, deg = [], 0
        for i, name in enumerate(names):
            k = t.get_exp(_PARAM, i)
            if k:
                f.append(name if k == 1 else f"{name}**{k}")
                deg += k
        if divs is None:
            divs = range(t.dim(_DIV))
        for i in divs:
            k = t.get_exp(_DIV, i)
            if k:
                fl = floors.get(i)
                if fl is None:
                    fl = floors[i] = f"floor({_sum_text(_aff_terms(t.get_div(i), names))})"
                f.append(fl if k == 1 else f"{fl}**{k}")
                deg += k
        terms.append((-deg, len(terms), (_fr(t.get_coefficient_val()), "*".join(f))))
    return _sum_text([x for _, _, x in sorted(terms)]) if terms else "0"


def _constraint_text(con, names: list) -> str:
    """``a >= 0`` (or ``a = 0``) with positive terms on each side: ``m - n - 1 >= 0`` -> ``m >= n + 1``."""
    terms = _aff_terms(con.get_aff(), names)
    den = lcm(*[d for (_, d), _ in terms]) if terms else 1
    lhs = [((k * (den // d), 1), m) for (k, d), m in terms if k > 0]
    rhs = [((-k * (den // d), 1), m) for (k, d), m in terms if k < 0]
    a, b = _sum_text(lhs), _sum_text(rhs)
    return f"Eq({a}, {b})" if con.is_equality() else f"{a} >= {b}"


def set_text(s, names: list) -> str:
    ors = []
    for bs in s.get_basic_sets():
        ands = [_constraint_text(c, names) for c in bs.get_constraints()]
        ors.append("True" if not ands else ands[0] if len(ands) == 1 else
                   " & ".join(a if a.startswith("Eq(") else f"({a})" for a in ands))
    if len(ors) == 1:
        return ors[0]
    return " | ".join(f"({o})" for o in ors)


#: the largest parameter value of the points :func:`zero_on` evaluates before it tries to prove
SMALL = 6


@lru_cache(maxsize=64)
def _box(n: int, top: int):
    """``{ [x0, …] : every xi <= top }`` (an isl set, immutable: shared by the calls)."""
    import islpy as isl

    xs = [f"x{i}" for i in range(n)]
    return isl.Set(f"{{ [{', '.join(xs)}] : " + " and ".join(f"{x} <= {top}" for x in xs) + " }")


class Region:
    """A set of parameter values, split once for :func:`zero_on`: per basic set a sample point (``points``) and,
    when first asked for (``parts``), the range of each parameter that is bounded there (None when some range
    has more than ``most`` values).  What :func:`zero_on` computes from the region alone (the basic sets as sets,
    the points further along a parameter, the basic sets with the bounded parameters fixed) is kept for the next
    quasi-polynomial tested on it."""

    def __init__(self, region, most: int = 64) -> None:
        self.set, self.most = region, most
        self.points = [(bs, bs.sample_point()) for bs in region.get_basic_sets()]
        self._parts = None
        self._small = None
        self._sets: dict = {}
        self._far: dict = {}
        self._fixed: dict = {}

    @property
    def small(self) -> list:
        """The points of the region with every parameter at most ``SMALL``, as points of the set whose dimensions
        are the parameters."""
        if self._small is None:
            n = self.set.dim(_PARAM)
            self._small = []
            if n:
                import islpy as isl

                flat = self.set.move_dims(isl.dim_type.set, 0, _PARAM, 0, n)
                (flat & _box(n, SMALL)).foreach_point(self._small.append)
        return self._small

    @property
    def parts(self) -> list:
        if self._parts is None:
            import islpy as isl

            n = self.set.dim(_PARAM)
            self._parts = []
            for bs, pt in self.points:
                flat = isl.Set.from_basic_set(bs.move_dims(isl.dim_type.set, 0, _PARAM, 0, n))
                ranges = {}
                for i in range(n):
                    hi = flat.dim_max_val(i)
                    if hi.is_int():
                        a, b = flat.dim_min_val(i).to_python(), hi.to_python()
                        ranges[i] = range(a, b + 1) if b - a < self.most else None
                self._parts.append((bs, pt, ranges))
        return self._parts

    def whole(self, k: int):
        """The ``k``-th basic set of :attr:`parts` as an isl set."""
        out = self._sets.get(k)
        if out is None:
            import islpy as isl

            out = self._sets[k] = isl.Set.from_basic_set(self.parts[k][0])
        return out

    def further(self, k: int, i: int):
        """A point of the ``k``-th basic set beyond its sample point along parameter ``i`` (void if none)."""
        key = (k, i)
        out = self._far.get(key)
        if out is None:
            import islpy as isl

            bs, pt = self.points[k]
            v = pt.get_coordinate_val(_PARAM, i)  # an isl value: a sample point may lie beyond a C long
            c = isl.Constraint.inequality_alloc(bs.get_local_space()).set_coefficient_val(_PARAM, i, 1) \
                .set_constant_val(v.add(isl.Val.one(v.get_ctx())).neg())
            out = self._far[key] = bs.add_constraint(c).sample_point()
        return out

    def fixed(self, k: int):
        """The ``k``-th basic set with each bounded parameter fixed, value by value (the empty ones left out):
        its sample point when every parameter is fixed, else the set; computed as far as a caller reads."""
        got = self._fixed.get(k)
        if got is None:
            got = self._fixed[k] = ([], self._fixings(k))
        items, more = got
        j = 0
        while True:
            if j == len(items):
                nxt = next(more, None)
                if nxt is None:
                    return
                items.append(nxt)
            yield items[j]
            j += 1

    def _fixings(self, k: int):
        import itertools

        import islpy as isl

        bs, _, ranges = self.parts[k]
        keys = sorted(ranges)
        every = len(keys) == self.set.dim(_PARAM)
        for combo in itertools.product(*[ranges[i] for i in keys]):
            fixed = bs
            for i, v in zip(keys, combo):
                fixed = fixed.fix_val(_PARAM, i, v)
            if fixed.is_empty():
                continue
            yield fixed.sample_point() if every else isl.Set.from_basic_set(fixed)


def _nonzero_further(qp, region: Region) -> bool:
    """True when ``qp`` is not 0 at a point of ``region`` beyond a basic set's sample point along a parameter (one
    more ILP sample per basic set and parameter): a cheap refutation."""
    n = region.set.dim(_PARAM)
    for k, (_, pt) in enumerate(region.points):
        if pt.is_void():
            continue
        for i in range(n):
            far = region.further(k, i)
            if not far.is_void() and not qp.eval(far).is_zero():
                return True
    return False


def _nonzero_small(qp, region: Region) -> bool:
    """True when ``qp`` is not 0 at a point of ``region`` with every parameter at most ``SMALL`` (isl evaluates the
    quasi-polynomial with its parameters moved to set dimensions at those points)."""
    n = region.set.dim(_PARAM)
    if not n or not region.small:
        return False
    import islpy as isl

    flat_qp = qp.move_dims(isl.dim_type.in_, 0, _PARAM, 0, n)  # the same polynomial of the points' coordinates
    return any(not flat_qp.eval(p).is_zero() for p in region.small)


def zero_on(qp, region: Region) -> bool | None:
    """Whether ``qp`` is 0 at every point of ``region``, as isl shows it: isl's evaluation at each basic set's
    sample point, at the points :func:`_nonzero_further` tries and at the points with small parameter values
    (:func:`_nonzero_small`); then per basic set, each value of the parameters bounded there fixed in turn, isl
    evaluates ``qp`` (every parameter fixed) or gists it to that set, which substitutes the equalities (the zero
    polynomial: 0 there).  None when isl can neither show nor refute it (none of those points refutes it then).
    The refutations come first: most pieces tested are not 0 on the region, and a point shows it faster than
    the gists."""
    for _, pt in region.points:
        if not pt.is_void() and not qp.eval(pt).is_zero():
            return False
    if _nonzero_further(qp, region) or _nonzero_small(qp, region):
        return False
    n = region.set.dim(_PARAM)
    undecided = False
    for k, (bs, pt, ranges) in enumerate(region.parts):
        if any(r is None for r in ranges.values()):
            return None
        keys = sorted(ranges)
        if len(keys) < n and qp.gist(region.whole(k)).is_zero():  # 0 on all of bs
            continue
        if not keys:
            undecided = True
            continue
        for got in region.fixed(k):
            if len(keys) == n:
                if not qp.eval(got).is_zero():
                    return False
            elif not qp.gist(got).is_zero():
                undecided = True
    return None if undecided else True
