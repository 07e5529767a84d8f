"""A cheap upper bound on a subgraph's intensity, to skip subgraphs that cannot lead (Theorem 5.1).

Theorem 5.1 bounds ``Q ≥ Σ_A |A| / max_{H ∋ A} ρ_H`` over *every* subgraph ``H``; any valid upper
bound on ``ρ_H`` may stand in for it (a larger ρ only weakens the bound).  The full derivation of
:func:`meshplan.solvers.soap.chi.intensity` (the face search for the best AM–GM dual, the joint
Loomis–Whitney constant, linear domination, KKT, tiles) costs tens of milliseconds per subgraph,
and a program with seven computed arrays has over a hundred subgraphs, most of which lead no
array.  :func:`screen` bounds ``ρ_H`` from the exponent LPs' first simplex duals alone:

* per max case (section 5.5.3) and statement ``s``, weighted AM–GM with the simplex's dual
  ``w`` gives ``χ_s(X) ≤ C_s X^{W_s}``, ``C_s = ∏_j (w_j/(W_s c_j))^{w_j}`` — the derivation's
  :func:`~meshplan.solvers.soap.relax.relaxation` picks the dual of smallest ``C`` on the same
  optimal face, so its constant is ≤ ``C_s``;
* the fused statements share one budget, and their joint constant (and linear domination) is at
  most ``Σ_s C_s`` — so ``χ_case(X) ≤ Σ_s C_s X^{W_s}``;
* the derivation evaluates every case at ``X0 = W·S/(W−1)`` of the leading exponent ``W`` (or
  takes ``X → ∞`` when ``W ≤ 1``); a closed form or KKT χ is exact, hence below the relaxation,
  and its ``X0`` minimizes ``χ(X)/(X − S)``, so its ρ is below the value at that same ``X0``.

So ``ρ_H ≤ max_case Σ_s C_s X0^{W_s} / (X0 − S)``.  When the leading exponent is at most 1 every case
is taken at ``X → ∞``, where a fused case reports the smaller of its relaxation's linear constant
and linear domination's ``z`` (χ ≤ z·X, an exact LP; it exists only when every statement's exponent
is ≤ 1): there the bound is ``min(z, Σ_{W_s = 1} C_s)``.  That LP is solved only for a subgraph the
bound without it does not settle (:meth:`Screen.refined`; ludcmp: 79 instead of 179 LPs), so a
screened row may show the larger ``Σ_{W_s = 1} C_s``.

A subgraph still not settled, when it is the next to be derived, first gets a last, finer stage
(:class:`Relaxed`; dearer, so taken only there): per
case the derivation's own certified relaxation — each statement's AM–GM constant from the best dual
of its LP's optimal face and the fused statements' joint constant with one shared budget
(:func:`~meshplan.solvers.soap.relax.joint_relaxation`, at most ``Σ_s C_s``) — evaluated at the same
``X0`` (with linear domination's ``z`` when ``W ≤ 1``).  It is the value the derivation reports for a
relaxation case, and an upper bound on a closed-form or KKT case (exact χ, below the relaxation, at
its minimizing ``X0``; the cases KKT could take are not screened at all), so it is ≥ the derived ρ;
it skips the derivation's closed forms, KKT, tiles and simplification.  It separates subgraphs
whose ρ has the leader's leading term and differs only in lower-order constants, which the sum of
the per-statement first-dual constants overestimates (ludcmp: 3 of 112 subgraphs derived instead of
18; their ρ are ``√S + 3`` … against the leader's ``√S + 4.66``, the first stage gave ``√S + 6`` …).
Problems this argument does not cover are not
screened (``None``) and are always derived: pyramids (their own χ), unbounded LPs, and max cases
that could take the KKT route (its ``X0`` is not ``W·S/(W−1)``, and the other cases are evaluated
at it).  :func:`meshplan.solvers.soap.bound.analyze` derives, per array, the subgraphs in order of
this bound until every other subgraph holding the array is at most the largest derived ρ at every
sampled memory size (:data:`~meshplan.solvers.soap.chi.SAMPLE_S`, the comparison the per-array
maximum already uses); the rest keep this bound as their reported ρ (method ``"screened"``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.cases import has_max, split_cases
from meshplan.models.soap.sdg import SubProblem
from meshplan.solvers.soap.chi import SAMPLE_S, Intensity, dominating, rho_value_at
from meshplan.solvers.soap.pyramid import pyramid_shape
from meshplan.solvers.soap.dual import log_constant
from meshplan.solvers.soap.domination import linear_domination
from meshplan.solvers.soap.monomials import access_coefficients
from meshplan.solvers.soap.relax import am_gm_constant, joint_relaxation, relaxation, simplex
from meshplan.solvers.soap.symbols import S, X

__all__ = ["Screen", "screen"]


@dataclass(frozen=True)
class Screen:
    """Per max case, per statement ``(C_s, W_s)`` with ``C_s`` as ``((w_j, c_j), …)`` pairs; ``exponent`` the
    leading ``W``."""

    cases: tuple[tuple[tuple[tuple[tuple[Fraction, Fraction], ...], Fraction], ...], ...]
    exponent: Fraction
    #: per case, linear domination's ``z`` (χ ≤ z·X) when the leading exponent is ≤ 1 and it has been
    #: asked for (:meth:`refined`), else empty
    linear: tuple = ()
    #: the max cases, kept while :meth:`refined` can still lower the bound
    problems: tuple = ()
    #: the max cases, for the relaxation stage of :meth:`refined`
    split: tuple = ()

    def refined(self, deep: bool = True) -> "Screen | Relaxed | None":
        """A lower or equal bound: first with linear domination's ``z`` taken in (when the leading exponent
        is ≤ 1 and a case is fused), then (with ``deep``) the derivation's own relaxation
        (:class:`Relaxed`); ``None`` when there is no further stage."""
        if self.problems:
            z = tuple(linear_domination(c) if len(c.work) > 1 else None for c in self.problems)
            return self._share(Screen(self.cases, self.exponent, z, (), self.split))
        return Relaxed.of(self.split, self.exponent) if deep and self.split else None

    @functools.cached_property
    def values(self) -> tuple[float, ...]:
        """The bound on ρ at each of :data:`SAMPLE_S`."""
        return tuple(self.rho_at(s) for s in SAMPLE_S)

    @functools.cached_property
    def _constants(self) -> tuple[tuple[tuple[float, Fraction], ...], ...]:
        """Per case, per statement ``(C_s, W_s)`` with ``C_s`` as a float (independent of S)."""
        return tuple(tuple((_constant(ws, Ws), Ws) for ws, Ws in case) for case in self.cases)

    def rho_at(self, s: float) -> float:
        """The bound on ρ at fast memory ``s``."""
        W = float(self.exponent)
        best = 0.0
        for n, case in enumerate(self._constants):
            if W <= 1:
                val = sum(C for C, Ws in case if Ws == 1)
                if self.linear and self.linear[n] is not None:
                    val = min(val, float(self.linear[n]))
            else:
                x0 = W * s / (W - 1)
                val = sum(C * x0 ** float(Ws) for C, Ws in case) / (x0 - s)
            best = max(best, val)
        return best

    def intensity(self, problem: SubProblem) -> Intensity:
        """The bound as the reported intensity of ``problem`` (method ``"screened"``): χ(X) the max over the
        cases of ``Σ_s C_s X^{W_s}``, ``X0`` and ρ as above."""
        chi, X0, rho = self._reported
        return Intensity(problem, "screened", chi, X0, rho, exponent=self.exponent, notes=(
            "not derived: its AM-GM bound from the exponent LPs' first duals is at most the largest derived "
            "ρ of a subgraph holding each of its arrays, at every sampled S, so it leads no array "
            "(Theorem 5.1); ρ shown is that upper bound",))

    @functools.cached_property
    def _reported(self) -> tuple:
        """``(χ, X0, ρ)`` as reported (once per bound: subgraphs equal up to renaming share it), looked up by
        the integer parts of the screen's numbers (hashing a ``Fraction`` is a modular inverse, and a
        many-case screen holds hundreds)."""
        sigs = self._signatures
        key = (sigs, self.exponent.numerator, self.exponent.denominator,
               tuple(None if z is None else (z.numerator, z.denominator) for z in self.linear))
        got = _SCREEN_REPORTED.get(key)
        if got is None:
            if len(_SCREEN_REPORTED) > 4096:
                _SCREEN_REPORTED.clear()
            got = _SCREEN_REPORTED[key] = _screen_reported(self.cases, sigs, self.exponent, self.linear)
        return got

    @functools.cached_property
    def _signatures(self) -> tuple:
        """Per case, per statement its ``(w_j, c_j)`` pairs and ``W_s`` as one tuple of integers (numerators and
        denominators): equal tuples, equal numbers (a refined screen shares its cases' signatures)."""
        return tuple(tuple((*[x for w, c in ws for x in (w.numerator, w.denominator, c.numerator, c.denominator)],
                            Ws.numerator, Ws.denominator) for ws, Ws in case) for case in self.cases)

    def _share(self, finer: Screen) -> Screen:
        """``finer`` (the same cases) with this screen's per-case numbers already computed (cached properties
        live in the instance dict)."""
        for name in ("_constants", "_signatures"):
            if name in self.__dict__:
                finer.__dict__[name] = self.__dict__[name]
        return finer


@dataclass(frozen=True)
class Relaxed:
    """The last screening stage: per max case the derivation's certified relaxation
    ``χ_case(X) ≤ Σ_W K_W X^W`` (:func:`~meshplan.solvers.soap.relax.relaxation` with the best duals of the
    optimal faces and :func:`~meshplan.solvers.soap.relax.joint_relaxation`'s shared budget), evaluated
    where the derivation evaluates it, without the derivation's closed forms, KKT, tiles and
    simplification (module doc)."""

    #: per case ``((K_W, W), …)`` with ``K_W`` exact (sympy)
    cases: tuple
    exponent: Fraction
    #: per case, linear domination's ``z`` (fused cases when the leading exponent is ≤ 1), else ``None``
    linear: tuple

    @staticmethod
    def of(split: tuple, exponent: Fraction) -> "Relaxed | None":
        out = []
        for case in split:
            relax = relaxation(case)
            if relax is None:
                return None
            out.append(tuple(joint_relaxation(case, relax)[0]))
        z = tuple(linear_domination(c) if exponent <= 1 and len(c.work) > 1 else None for c in split)
        return Relaxed(tuple(out), exponent, z)

    def refined(self, deep: bool = True) -> None:
        return None

    @functools.cached_property
    def values(self) -> tuple[float, ...]:
        """The bound on ρ at each of :data:`SAMPLE_S`."""
        return tuple(self.rho_at(s) for s in SAMPLE_S)

    @property
    def _rhos(self) -> list:
        """Per case ρ as a sympy expression of ``S`` (the derivation's unsimplified value)."""
        return _relaxed_rhos(self.cases, self.exponent, self.linear)

    @functools.cached_property
    def _floats(self) -> tuple:
        return tuple(tuple((float(K), float(w)) for K, w in case) for case in self.cases)

    def rho_at(self, s: float) -> float:
        """The bound on ρ at fast memory ``s``."""
        if self.exponent <= 1:
            return max(float(r) for r in self._rhos)
        W = float(self.exponent)
        x0 = W * s / (W - 1)
        return max(sum(K * x0 ** w for K, w in case) / (x0 - s) for case in self._floats)

    def intensity(self, problem: SubProblem) -> Intensity:
        """The bound as the reported intensity of ``problem`` (method ``"screened"``)."""
        chi, X0, rho = self._reported
        return Intensity(problem, "screened", chi, X0, rho, exponent=self.exponent, notes=(
            "not derived: its certified AM-GM relaxation (best duals, shared budget) is at most the largest "
            "derived ρ of a subgraph holding each of its arrays, at every sampled S, so it leads no array "
            "(Theorem 5.1); ρ shown is that upper bound",))

    @functools.cached_property
    def _reported(self) -> tuple:
        """``(χ, X0, ρ)`` as reported (once per bound)."""
        return _relaxed_reported(self.cases, self.exponent, self.linear)


# The reported (χ, X0, ρ) of a screen are a function of its numbers alone (per case the constants and
# exponents, the leading exponent, linear domination's z): screens of different subgraphs with the same
# numbers share one sympy construction (deriche: 179 screens reported, 110 distinct).

_SCREEN_REPORTED: dict[tuple, tuple] = {}


def _screen_reported(cases: tuple, sigs: tuple, exponent: Fraction, linear: tuple) -> tuple:
    """:attr:`Screen._reported` (``sigs``: :attr:`Screen._signatures`, to look the AM–GM constants up by)."""
    W = sp.Rational(exponent)
    consts = [[_am_gm(sig, ws, Ws) for sig, (ws, Ws) in zip(sc, case)] for sc, case in zip(sigs, cases)]
    chis = [sp.Add(*[C * X ** sp.Rational(Ws) for C, (_, Ws) in zip(cs, case)]) for cs, case in zip(consts, cases)]
    if exponent <= 1:
        X0 = sp.oo
        rhos = [sp.Add(*[C for C, (_, Ws) in zip(cs, case) if Ws == 1]) for cs, case in zip(consts, cases)]
        for n, z in enumerate(linear):
            if z is not None and z <= float(rhos[n]):
                rhos[n] = sp.Rational(z)
                chis[n] = rhos[n] * X
    else:
        X0 = W * S / (W - 1)
        rhos = [sp.expand(c.xreplace({X: X0}) / (X0 - S)) for c in chis]   # (as subs, for a symbol)
    return _largest(chis, rhos, X0)


def _am_gm(sig: tuple, ws: tuple, Ws: Fraction) -> sp.Expr:
    """:func:`~meshplan.solvers.soap.relax.am_gm_constant` of ``(ws, Ws)``, looked up by its signature."""
    got = _AM_GM.get(sig)
    if got is None:
        if len(_AM_GM) > 65536:
            _AM_GM.clear()
        got = _AM_GM[sig] = am_gm_constant(ws, Ws)
    return got


_AM_GM: dict[tuple, sp.Expr] = {}


@functools.lru_cache(maxsize=4096)
def _relaxed_rhos(cases: tuple, exponent: Fraction, linear: tuple) -> list:
    """:attr:`Relaxed._rhos` (read only)."""
    if exponent <= 1:
        rhos = [sp.Add(*[K for K, w in case if w == 1]) for case in cases]
        return [sp.Rational(z) if z is not None and float(z) <= float(r) else r for r, z in zip(rhos, linear)]
    W = sp.Rational(exponent)
    X0 = W * S / (W - 1)
    return [sp.Add(*[K * X0 ** sp.Rational(w) for K, w in case]) / (X0 - S) for case in cases]


@functools.lru_cache(maxsize=4096)
def _relaxed_reported(cases: tuple, exponent: Fraction, linear: tuple) -> tuple:
    """:attr:`Relaxed._reported`."""
    chis = [sp.Add(*[K * X ** sp.Rational(w) for K, w in case]) for case in cases]
    rhos = _relaxed_rhos(cases, exponent, linear)
    if exponent <= 1:
        X0 = sp.oo
        chis = [r * X if z is not None and r == sp.Rational(z) else c for c, r, z in zip(chis, rhos, linear)]
    else:
        W = sp.Rational(exponent)
        X0 = W * S / (W - 1)
        rhos = [sp.expand(r) for r in rhos]
    return _largest(chis, rhos, X0)


def _largest(chis: list, rhos: list, X0) -> tuple:
    """``(χ, X0, ρ)`` of the max over the cases: the case whose ρ dominates at every sampled S, else a
    ``Max`` of the distinct ρ (they differ numerically); χ likewise."""
    uniq = list(dict.fromkeys(rhos))
    dom = dominating([[rho_value_at(r, s) for s in SAMPLE_S] for r in uniq])   # cached per expression
    rho = uniq[dom] if dom is not None else sp.Max(*uniq, evaluate=False)
    chi = chis[0] if len(set(chis)) == 1 else sp.Max(*dict.fromkeys(chis), evaluate=False)
    return chi, X0, rho


def _constant(ws, W) -> float:
    return math.exp(log_constant([wj for wj, _ in ws], [cj for _, cj in ws], W))


def screen(problem: SubProblem) -> Screen | None:
    """The screening bound of ``problem`` (see the module doc), or ``None`` when it must be derived."""
    if pyramid_shape(problem) is not None:
        return None
    cases = split_cases(problem) if has_max(problem) else [problem]
    if len(cases) > 1 and any(len(c.work) == 1 and len(c.classes) <= 4 and not c.constraints for c in cases):
        return None        # a case may take the KKT route, whose X0 the other cases are evaluated at
    out = []
    for case in cases:
        coeffs = access_coefficients(case)    # aligned with every exponent LP's keys
        stmts = []
        for _, cls in case.work:
            lp = simplex(case, cls)
            if lp is None:
                return None
            _, A, _, _, (W, _, y) = lp
            stmts.append((tuple((wj, cj) for wj, cj in zip(y[:len(A)], coeffs) if wj.numerator > 0), W))
        out.append(tuple(stmts))
    W = max(Ws for case in out for _, Ws in case)
    # every case at X → ∞ when W ≤ 1: a fused case reports min(z, its relaxation) (linear domination),
    # an exact LP solved only when the bound without it does not settle the subgraph (Screen.refined)
    fused = W <= 1 and any(len(c.work) > 1 for c in cases)
    return Screen(tuple(out), W, (), tuple(cases) if fused else (), tuple(cases))
