"""Weak types and weak collectives (paper §5 and §7.2).

Two well-formed types with equal global and local types are related by a
permutation of the mesh (Lemma 5.1), so over a prime mesh the weak type
``E⟦τ⟧`` is determined by ``localtype(τ)`` once ``globaltype(τ)`` is fixed (§7.2).
A weak type is valid when the primes of its partition counts ``s_i / c_i`` can be
drawn from the mesh's prime axis sizes.  The weak multi-axis collectives move a
factor ``f`` (any product of available primes) instead of named axes.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Literal

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.decompose import prime_factors
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import DistType

__all__ = ["WeakType", "WeakStep", "weak_of", "mesh_primes", "weak_successors", "divisors"]


@dataclass(frozen=True, slots=True)
class WeakType:
    """``E⟦τ⟧`` represented by its global and local types."""

    globaltype: tuple[int, ...]
    localtype: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.globaltype) != len(self.localtype):
            raise ModelError("a weak type needs as many local as global sizes")
        for s, c in zip(self.globaltype, self.localtype):
            if c < 1 or s % c:
                raise ModelError(f"local size {c} does not divide global size {s}")

    @property
    def localsize(self) -> int:
        """The number of elements each device holds."""
        return math.prod(self.localtype)

    @property
    def parts(self) -> tuple[int, ...]:
        """The number of parts each dimension is split into (global over local size)."""
        return tuple(s // c for s, c in zip(self.globaltype, self.localtype))

    def used_primes(self) -> Counter:
        """The multiset of prime factors of all parts (the mesh factors the type uses)."""
        out: Counter = Counter()
        for p in self.parts:
            out.update(prime_factors(p) if p > 1 else ())
        return out

    def __str__(self) -> str:
        return "[" + ",".join(f"{c}/{s}" if c != s else str(s)
                              for s, c in zip(self.globaltype, self.localtype)) + "]"


#: the three weak multi-axis collectives of §7.2
WeakOp = Literal["allgather", "alltoall", "dynslice"]


@dataclass(frozen=True, slots=True)
class WeakStep:
    """A weak multi-axis collective moving the factor ``factor`` (§7.2 graph edge)."""

    op: WeakOp
    src: int         # the dimension gathered / sliced / giving up axes
    dst: int | None  # receiving dimension of an alltoall
    factor: int
    merged: bool = False  # an alltoall done in the same collective as the step before it (wire-cost search)

    def __str__(self) -> str:
        if self.op == "alltoall":
            return f"{'+' if self.merged else ''}alltoall({self.src}, {self.dst}, ×{self.factor})"
        return f"{self.op}({self.src}, ×{self.factor})"


def weak_of(t: DistType) -> WeakType:
    """The weak type (§7.2) of a distributed type: its global and local sizes only."""
    return WeakType(t.globaltype, t.localtype)


def mesh_primes(mesh: Mesh) -> Counter:
    """Multiset of prime axis sizes of ``mesh`` (after decomposition)."""
    out: Counter = Counter()
    for k in mesh.sizes:
        if k > 1:
            out.update(prime_factors(k))
    return out


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` greater than 1, ascending."""
    small = [d for d in range(2, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small] + ([n] if n > 1 else [])))


def _fits(f: int, free: Counter) -> bool:
    need = Counter(prime_factors(f))
    return all(free[p] >= k for p, k in need.items())


def weak_successors(primes: Counter, w: WeakType) -> Iterator[tuple[WeakStep, WeakType]]:
    """All ``w ▶ w'`` (Def. 5.3, multi-axis): allgather, alltoall and dynslice of every factor."""
    parts = w.parts
    loc = list(w.localtype)
    free = primes - w.used_primes()
    for i, p in enumerate(parts):
        for f in divisors(p):
            new = loc.copy()
            new[i] *= f
            yield WeakStep("allgather", i, None, f), WeakType(w.globaltype, tuple(new))
            for j in range(len(loc)):
                if j != i and loc[j] % f == 0:
                    new2 = new.copy()
                    new2[j] //= f
                    yield WeakStep("alltoall", i, j, f), WeakType(w.globaltype, tuple(new2))
    for i, c in enumerate(loc):
        for f in divisors(c):
            if _fits(f, free):
                new = loc.copy()
                new[i] //= f
                yield WeakStep("dynslice", i, None, f), WeakType(w.globaltype, tuple(new))
