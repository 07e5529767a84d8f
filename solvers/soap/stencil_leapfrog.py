"""Leapfrog stencils (fdtd-2d): one statement reads the same step's values of the others (thesis chapter 5).

Yee's scheme (PolyBench fdtd-2d) updates, inside one time loop, "spoke" arrays from the previous step's
"hub" array (``ey[i, j] −= ·(hz[i, j] − hz[i − 1, j])``, ``ex[i, j] −= ·(hz[i, j] − hz[i, j − 1])``) and
then the hub from the spokes of the same step (``hz[i, j] −= ·(ex[i, j + 1] − ex[i, j] + ey[i + 1, j]
− ey[i, j])``); each statement also reads its own previous value.  The pyramid of
:func:`meshplan.solvers.soap.pyramid.pyramid_chi` assumes that every statement reads only the previous
layer; here a layer argument over every dominator (the thesis's X-partition, section 5.2.2) gives

    χ(X) = k^{(d−1)/d}·X^{(d+1)/d} / ((d+1)·κ) + (k + 1)·X,   X0 = (d+1)·S,

for ``k`` statements (one hub, ``k − 1`` spokes) over ``d`` spatial dimensions, where ``κ^d`` is the
hull volume of the hub's one-step offsets ``K = {0} ∪ ⋃_s (U_s + O_s)`` (``U_s``: the hub's reads of
spoke ``s``, ``O_s``: spoke ``s``'s reads of the hub; fdtd-2d: the 5-point cross, ``κ² = 2``, χ =
``X^{3/2}/√6 + 4X``).  See :func:`leapfrog_chi` for the argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.pyramid import _lattice_volumes, _offsets
from meshplan.solvers.soap.symbols import S, X

__all__ = ["Leapfrog", "leapfrog_stencil", "leapfrog_chi"]

Offsets = tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Leapfrog:
    """A leapfrog stencil: ``d`` spatial dimensions, the hub statement's name, and per spoke (by name)
    the hub's read offsets of it (``U``) and its read offsets of the hub (``O``), in array coordinates."""

    d: int
    hub: str
    spokes: tuple[tuple[str, Offsets, Offsets], ...]

    @property
    def k(self) -> int:
        """The number of statements (vertices per cell and time step)."""
        return 1 + len(self.spokes)

    @property
    def hub_offsets(self) -> Offsets:
        """``K``: where a hub value of one step reaches the hub of the next, ``{0} ∪ ⋃_s (U_s + O_s)``."""
        got = {(0,) * self.d}
        for _, U, O in self.spokes:
            got |= {tuple(a + b for a, b in zip(u, o)) for u in U for o in O}
        return tuple(sorted(got))


def _cell_reads(st, arrays) -> dict[str, list[tuple[int, ...]]] | None:
    """Per array of ``arrays`` the constant offsets (array coordinates) of ``st``'s reads of it; ``None``
    when ``st`` is no sweep of one time loop over ``d`` inner loops that index its output once each, or a
    read is not the output's cell plus a constant."""
    loops, out = st.loops, st.output
    if len(loops) < 2 or any(lp.step != 1 for lp in loops):
        return None
    inner = {lp.var for lp in loops[1:]}
    names = [e.name if isinstance(e, sp.Symbol) else None for e in out.index]
    if None in names or sorted(names) != sorted(inner):
        return None
    got: dict[str, list[tuple[int, ...]]] = {}
    for name in dict.fromkeys(a.array for a in st.inputs if a.array in arrays):
        offsets = _offsets(st, {name})     # the output's subscripts hold no time: neither may a constant offset
        if offsets is None:
            return None
        got[name] = list(offsets)
    return got


def leapfrog_stencil(stmts, arrays) -> Leapfrog | None:
    """The :class:`Leapfrog` structure of the statements ``stmts`` (in program order, one time loop; the
    caller has checked the common time class), else ``None``.

    Each statement writes its own array, sweeps it in its own loop nest (no inner loop shared) and reads
    its own previous value (offset 0).  The last statement (the hub) reads every other array (the spokes)
    at constant offsets — the same step's values, as the spokes' nests come first; every spoke reads the
    hub (its previous step's values) and no other spoke.  Each spoke vertex that is loaded must excuse at
    most one missing hub value (see :func:`leapfrog_chi`): a spoke reads the hub at one offset, or at two
    of which one mirrors a hub read of it (``−U_s ⊆ O_s``)."""
    if len(stmts) < 2 or len({st.output.array for st in stmts}) != len(stmts):
        return None
    reads = [_cell_reads(st, arrays) for st in stmts]
    if None in reads:
        return None
    inner = [{lp.var for lp in st.loops[1:]} for st in stmts]
    if any(inner[a] & inner[b] for a in range(len(stmts)) for b in range(a)):
        return None
    if len({len(st.output.index) for st in stmts}) != 1 or len({st.loops[0].var for st in stmts}) != 1:
        return None
    d = len(stmts[0].output.index)
    zero = (0,) * d
    for st, got in zip(stmts, reads):
        if zero not in got.get(st.output.array, []):
            return None
    hub, spokes = stmts[-1], stmts[:-1]
    got_hub = reads[-1]
    out = []
    for st, got in zip(spokes, reads[:-1]):
        A = st.output.array
        if set(got) - {A, hub.output.array} or hub.output.array not in got or A not in got_hub:
            return None
        U, O = tuple(sorted(set(got_hub[A]))), tuple(sorted(set(got[hub.output.array])))
        mirrored = all(tuple(-x for x in u) in O for u in U)
        if len(O) > 2 or (len(O) == 2 and not mirrored):
            return None
        out.append((st.name, U, O))
    if set(got_hub) - {st.output.array for st in stmts}:
        return None
    return Leapfrog(d, hub.name, tuple(out))


def leapfrog_chi(shape: Leapfrog):
    """``(χ(X), X0, ρ(S), W)`` of a leapfrog stencil, or ``None`` when its hub offsets span fewer than ``d``
    dimensions (then nothing here bounds it).

    The argument, at interior points, for any dominator ``D`` of ``|D| ≤ X`` vertices: let ``C`` hold every
    vertex all of whose paths from the inputs meet ``D``; per step ``t`` let ``H_t`` be the hub's cells in
    ``C ∖ D`` (``h_t = |H_t|``), ``a_t`` the hub's vertices in ``D`` and ``b_t`` the spokes'.

    1. *Own chains.*  A vertex of ``C ∖ D`` reads its own previous value, so each array's cells in ``C`` at
       step ``t`` number at most its ``D`` vertices up to ``t``.  The hub reads spoke ``s`` at ``H_t + U_s``,
       so ``c_{≤t} := Σ_{τ ≤ t} (a_{τ−1} + b_τ) ≥ k·h_t``.
    2. *Witnesses.*  A hub value ``c ∈ H_t + K`` of step ``t − 1`` not in ``C`` is read, through some spoke
       value ``w = h + u`` of step ``t`` (``h ∈ H_t``, ``c = w + o``), by ``H_t``; ``w`` is then in ``D``.
       ``w`` excuses at most one such ``c``: its other hub read ``w − u`` lies in ``H_t``, whose previous
       hub values are in ``C`` (the hub's own chain).  So ``h_{t−1} + a_{t−1} + b_t ≥ |H_t + K| ≥ h_t +
       dκ·h_t^{(d−1)/d}`` (Brunn–Minkowski, ``κ^d = |conv K|`` in the lattice ``K`` generates).
    3. *Budget.*  With ``c_t = a_{t−1} + b_t`` (disjoint over ``t``, ``Σ c_t ≤ X``) and ``H = h_m`` the
       largest layer: after ``m``, ``h_t ≤ H + R − dκ Σ_{m<τ≤t} h_τ^{(d−1)/d}`` (``R = X − c_{≤m}``) as for the
       pyramid; before it, ``c_{≤m} ≥ k·h_s + (H − h_s) + dκ Σ_{s<τ≤m} h_τ^{(d−1)/d}`` (1 at ``s``, 2 after).
       Integrating ``h^{1/d}`` against ``Σ h^{(d−1)/d}`` on both sides gives
       ``Σ_t h_t ≤ H^{1/d}(X − kH)/(dκ) + k·H^{(d+1)/d}/((d+1)κ) + H``, increasing in ``H ≤ X/k``:
       ``Σ_t h_t ≤ X^{(d+1)/d}/(k^{1/d}(d+1)κ) + X/k``.
    4. A spoke value in ``C ∖ D`` reads the previous hub step: per step at most ``h_{t−1} + a_{t−1}`` of
       them per spoke, so ``|C| ≤ X + k·Σ_t h_t + (k − 1)·X``, the χ above.

    The fdtd-2d CDAG holds subcomputations of ``≈ 0.30·X^{3/2}`` beyond their dominator (a diamond that
    grows one cell per step, stays, and shrinks one cell per step: ``X^{3/2}/√10`` asymptotically, against
    ``X^{3/2}/√6`` here), so the constant is within 1.3 of the largest subcomputation; like the pyramid, the
    argument is for interior points."""
    d, k = shape.d, shape.k
    rank, (vol,) = _lattice_volumes([shape.hub_offsets])
    if rank < d or vol <= 0:
        return None
    kappa = sp.Rational(vol.numerator, vol.denominator) ** sp.Rational(1, d)
    W = sp.Rational(d + 1, d)
    chi = sp.Integer(k) ** sp.Rational(d - 1, d) * X ** W / ((d + 1) * kappa) + (k + 1) * X
    X0 = (d + 1) * S
    rho = simplified(chi.subs(X, X0) / (X0 - S))
    return chi, X0, rho, Fraction(d + 1, d)
