"""Integer I/O-optimal tiles from CP-SAT (section 5.4.5 with integer sizes).

For concrete sizes and S, :func:`integer_tiles` compares three tilings of one
(subgraph) statement, all under the memory (dominator) constraint
``F(D) = Σ_j |A_j(D)| ≤ X0``:

* the continuous optimum: the symbolic tiles |D^t|(X0) when the KKT solution
  is known, else a numeric local search (a real point, not a schedule);
* the best rounding of it: every floor/ceil combination that satisfies the
  constraint and the loop extents, keeping the one with the most work;
* the CP-SAT optimum of :mod:`meshplan.encodings.soap.tiles`, constrained to do
  at least the work of the best rounding — so it is never worse.

The reported gap is continuous work over integer work (≥ 1 up to the caps).
Every answer is re-checked solver-free before it is returned.  When X0 = ∞
(χ linear: no reuse grows with the tile) tiles are reported for X = 2S.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

import sympy as sp

from meshplan.encodings.soap.tiles import encode_tiles
from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program, sym
from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.tile_check import access_size, check_tile, work_value
from meshplan.solvers.backends.base import get_backend
from meshplan.solvers.soap.chi import S as S_SYM
from meshplan.solvers.soap.chi import X as X_SYM
from meshplan.solvers.soap.chi import Intensity, numeric_tiles

__all__ = ["TileResult", "integer_tiles", "extents", "lower_bounds"]

_CAP_PRODUCT = 2 ** 52


@dataclass(frozen=True)
class TileResult:
    """Continuous, rounded and CP-SAT integer tiles of one subgraph under the dominator budget X0 (section 5.4.5)."""

    subgraph: tuple[str, ...]
    memory: int
    budget: int                 # X0 (rounded down): the dominator-set budget of a tile
    continuous: dict            # class -> float
    continuous_work: float
    rounded: dict | None
    rounded_work: int | None
    integer: dict | None
    integer_work: int | None
    status: Literal["optimal", "feasible", "rounded", "fits", "infeasible"]
    caps: dict = field(default_factory=dict)
    notes: tuple = ()

    @property
    def gap(self) -> float | None:
        """Continuous over integer work (≥ 1 when the continuous point lies in the box)."""
        if not self.integer_work or not self.continuous_work:
            return None
        return self.continuous_work / self.integer_work


def extents(program: Program, problem: SubProblem, values: dict[str, int]) -> dict[str, int]:
    """The largest number of values each tile variable takes (loop range at its widest)."""
    out: dict[str, int] = {}
    psubs = {sym(k): v for k, v in values.items()}
    for cls, members in problem.members.items():
        best = 1
        for v in members:
            for st in program.statements:
                loops = {lp.var: lp for lp in st.loops}
                if v not in loops:
                    continue
                lp = loops[v]
                span = (lp.upper - lp.lower).subs(psubs)
                outer = sorted(span.free_symbols, key=str)
                ranges = []
                for o in outer:
                    olp = loops.get(str(o))
                    if olp is None:
                        raise ModelError(f"give a value for {o} in params", param="params")
                    lo = olp.lower.subs(psubs)
                    hi = olp.upper.subs(psubs) - 1
                    ranges.append((o, [lo, hi]))
                corner = 0
                for combo in itertools.product(*[r for _, r in ranges]):
                    val = span.subs(dict(zip([o for o, _ in ranges], combo)))
                    val = val.subs(psubs)
                    if val.free_symbols:  # bounds of bounds: widen with the parameters only
                        val = val.subs({s: 0 for s in val.free_symbols})
                    corner = max(corner, int(math.ceil(float(val) / lp.step)))
                best = max(best, corner)
        out[cls] = max(1, best)
    return out


def lower_bounds(problem: SubProblem) -> dict[str, int]:
    """|D^v| ≥ max(1, |t̂|) over the box dimensions that use ``v`` alone (Lemma 5.3's domain)."""
    low = {c: 1 for c in problem.classes}
    for t in problem.terms:
        if t.kind == "union":
            continue
        for d, tv in zip(t.dims, t.t):
            if len(d) == 1:
                low[d[0]] = max(low[d[0]], int(tv))
    return low


def _continuous(intensity: Intensity, budget: float, low: dict, caps: dict):
    """The continuous optimum: symbolic tiles |D|(X0) if feasible here, else a numeric search."""
    prob = intensity.problem
    sym_tiles = None
    if intensity.tiles_of_X:
        try:
            sym_tiles = {c: float(sp.N(e.subs(X_SYM, budget))) for c, e in intensity.tiles_of_X.items()}
        except (TypeError, ValueError):
            sym_tiles = None
    if sym_tiles and intensity.method == "kkt" and \
            all(low[c] - 1e-9 <= v <= caps[c] + 1e-9 for c, v in sym_tiles.items()) and \
            _real(prob, sym_tiles, "access") <= budget * (1 + 1e-9):
        return sym_tiles, _real(prob, sym_tiles, "work")
    init = [{c: min(max(v, low[c]), caps[c]) for c, v in sym_tiles.items()}] if sym_tiles else None
    num, _ = numeric_tiles(prob, float(budget), caps=caps, lower=low, initial=init)
    if num is None:
        return None, -1.0
    return num, _real(prob, num, "work")


def _real(problem: SubProblem, D: dict, what: str) -> float:
    sy = problem.symbols
    sub = {sy[c]: v for c, v in D.items()}
    e = problem.access_expr() if what == "access" else problem.work_expr()
    return float(e.subs(sub))


def integer_tiles(program: Program, intensity: Intensity, values: dict[str, int], *,
                  time_limit_s: float = 3.0) -> TileResult:
    """Best integer tiles for ``intensity.problem`` at the sizes and S of ``values``."""
    prob = intensity.problem
    if "S" not in values:
        raise ModelError("integer tiles need S in params (the fast-memory size in words)", param="params")
    memory = int(values["S"])
    notes = []
    if intensity.X0 == sp.oo or intensity.X0 is None:
        budget = 2 * memory
        notes.append("X0 = ∞ (χ is linear): tiles for a dominator budget X = 2S")
    else:
        budget = int(math.floor(float(sp.N(intensity.X0.subs(S_SYM, memory)))))
    ext = extents(program, prob, values)
    low = lower_bounds(prob)
    caps = {c: max(low[c], ext[c]) for c in prob.classes}
    while math.prod(caps.values()) > _CAP_PRODUCT:
        big = max(caps, key=caps.get)
        caps[big] = max(low[big], caps[big] // 2)
        notes.append("tile caps halved to keep products below 2^52")
    full = dict(caps)
    if access_size(prob, full) <= budget:
        w = work_value(prob, full)
        return TileResult(prob.arrays, memory, budget, {c: float(v) for c, v in full.items()}, float(w),
                          full, w, full, w, "fits", caps,
                          tuple(notes) + ("the whole iteration box fits the budget: one tile",))
    if access_size(prob, low) > budget:
        return TileResult(prob.arrays, memory, budget, {}, 0.0, None, None, None, None, "infeasible",
                          caps, tuple(notes) + ("even the smallest tile exceeds X0",))
    cont, cont_w = _continuous(intensity, budget, low, caps)
    if cont is None:
        cont, cont_w = {c: float(v) for c, v in low.items()}, float(work_value(prob, low))
        notes.append("no continuous optimum found; rounding starts from the smallest tile")
    rounded, rw = None, -1
    for combo in itertools.product(*[sorted({max(low[c], min(caps[c], math.floor(cont[c]))),
                                             max(low[c], min(caps[c], math.ceil(cont[c])))})
                                     for c in prob.classes]):
        D = dict(zip(prob.classes, combo))
        if access_size(prob, D) <= budget:
            w = work_value(prob, D)
            if w > rw:
                rounded, rw = D, w
    if rounded is None:
        rounded, rw = dict(low), work_value(prob, low)
    max_work = None
    if intensity.chi is not None:
        try:
            max_work = max(rw, int(math.floor(float(sp.N(intensity.chi.subs(X_SYM, budget))) * (1 + 1e-12))))
        except (TypeError, ValueError):
            max_work = None
    enc = encode_tiles(prob, budget=budget, lower=low, caps=caps, min_work=rw, max_work=max_work,
                       hint=rounded)
    sol = get_backend("cpsat").solve(enc, time_limit_s=time_limit_s)
    if sol.status.has_solution:
        best = enc.decode(sol.values)
        status = "optimal" if sol.status.name == "OPTIMAL" else "feasible"
    else:
        best, status = dict(rounded), "rounded"
        notes.append(f"CP-SAT {sol.status.value}: the best rounding is reported")
    check_tile(prob, best, budget, low, caps)
    if work_value(prob, best) > cont_w:   # the local search missed the real optimum: polish from here
        ref, _ = numeric_tiles(prob, float(budget), starts=0, caps=caps, lower=low, initial=[best, cont])
        if ref is not None and _real(prob, ref, "access") <= budget * (1 + 1e-9) and \
                _real(prob, ref, "work") > cont_w:
            cont, cont_w = ref, _real(prob, ref, "work")
            notes.append("continuous optimum refined by a local search started at the CP-SAT tile")
    return TileResult(prob.arrays, memory, budget, cont, cont_w, rounded, rw, best,
                      work_value(prob, best), status, caps, tuple(notes))


