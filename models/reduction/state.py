"""Device states as state matrices (P2 §3.2, Figure 7).

A device's state is a ``k × N`` boolean matrix: row ``r`` is chunk ``r`` of
the data, column ``d`` says whether device ``d``'s original chunk ``r`` has
been added in.  We store a row as a Python ``int`` bit mask over devices (bit
``d`` = column ``d``) and a state as a tuple of ``k`` masks, so states are
hashable values and ``⊕`` of disjoint rows is a bitwise or.

A *context* (``G`` in the paper) is the tuple of all devices' states.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Sequence

__all__ = ["State", "Context", "initial_context", "goal_context", "rows", "EMPTY"]

State = tuple[int, ...]
Context = tuple[State, ...]
EMPTY = 0


def rows(state: State) -> frozenset[int]:
    """Indices of the non-empty rows (chunks the device holds)."""
    return frozenset(r for r, m in enumerate(state) if m)


@lru_cache(maxsize=64)
def initial_context(num_devices: int, chunks: int) -> Context:
    """Every device holds its own data in every chunk: row r of device d = {d} (§3.5)."""
    return tuple(tuple(1 << d for _ in range(chunks)) for d in range(num_devices))


def goal_context(groups: Iterable[Sequence[int]], num_devices: int, chunks: int) -> Context:
    """Every device holds, in every chunk, the sum over exactly its reduction group (§3.5)."""
    return _goal_context(tuple(tuple(g) for g in groups), num_devices, chunks)


@lru_cache(maxsize=64)
def _goal_context(groups: tuple[tuple[int, ...], ...], num_devices: int, chunks: int) -> Context:
    out: list[State | None] = [None] * num_devices
    for g in groups:
        mask = 0
        for d in g:
            mask |= 1 << d
        for d in g:
            out[d] = tuple(mask for _ in range(chunks))
    for d, s in enumerate(out):
        if s is None:  # a device in no group reduces with itself only
            out[d] = tuple(1 << d for _ in range(chunks))
    return tuple(out)  # type: ignore[return-value]
