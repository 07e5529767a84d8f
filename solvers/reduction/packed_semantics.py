"""A fast, packed implementation of the Figure 8 rules for the synthesizer.

The reference semantics (:mod:`meshplan.models.reduction.semantics`) keeps a
device's state as ``k`` row masks; here a device's whole ``k × g`` state
matrix is one Python integer (chunk ``r`` occupies bits ``r·g … r·g+g−1``),
so ``⊕`` of disjoint states is one ``|`` and "pairwise disjoint" one ``&``
per member, at C speed for any ``g``.  Which chunks a device holds (its
non-empty rows) is a ``k``-bit *occupancy* mask, cached per state.

This engine only serves the search: every program it finds is lowered and
replayed by the reference checker, and a property test compares the two on
random programs (tests/solvers/test_packed_semantics.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from meshplan.models.core.collectives import Collective
from meshplan.models.reduction.state import Context

__all__ = ["PackedSemantics"]

#: above this many bits per device state, conversions go through numpy bit arrays (linear in the bits);
#: below it, the plain shift loops are faster.  The shift loops are quadratic in the chunks: a state of
#: 512 chunks of 512 bits took ~0.1 s per device to pack (P2 §4 at 8,192 devices, reduction groups of 512)
_WIDE_BITS = 1 << 14


class PackedSemantics:
    """States of ``g`` devices with ``k`` chunks each, as tuples of ints."""

    def __init__(self, g: int, k: int) -> None:
        self.g, self.k = g, k
        self.row_mask = (1 << g) - 1
        self._occ: dict[int, int] = {}
        self._expand: dict[int, int] = {}

    # -- conversion ----------------------------------------------------------------------
    def pack(self, ctx: Context) -> tuple[int, ...]:
        """Pack a context of row-mask states into one integer per device."""
        if self.g * self.k > _WIDE_BITS:
            return tuple(self._pack_wide(state) for state in ctx)
        return tuple(sum(m << (r * self.g) for r, m in enumerate(state)) for state in ctx)

    def unpack(self, packed: Sequence[int]) -> Context:
        """The context of row-mask states that :meth:`pack` packed."""
        if self.g * self.k > _WIDE_BITS:
            return tuple(self._unpack_wide(x) for x in packed)
        return tuple(tuple((x >> (r * self.g)) & self.row_mask for r in range(self.k)) for x in packed)

    # -- wide states: one (k, g) bit array per device, converted in linear time ----------------
    def _bits(self, x: int) -> np.ndarray:
        """The ``(k, g)`` bool array of a packed state (row ``r``, bit ``c``)."""
        n = self.k * self.g
        raw = np.frombuffer(x.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[:n].reshape(self.k, self.g).astype(bool)

    @staticmethod
    def _int(bits: np.ndarray) -> int:
        """The integer whose bit ``i`` is ``bits.flat[i]``."""
        return int.from_bytes(np.packbits(bits.reshape(-1), bitorder="little").tobytes(), "little")

    def _pack_wide(self, state: Sequence[int]) -> int:
        width = (self.g + 7) // 8
        raw = np.frombuffer(b"".join(m.to_bytes(width, "little") for m in state), dtype=np.uint8)
        rows = np.unpackbits(raw.reshape(len(state), width), axis=1, bitorder="little")[:, :self.g]
        return self._int(rows)

    def _unpack_wide(self, x: int) -> tuple[int, ...]:
        return tuple(self._int(row) for row in self._bits(x))

    # -- helpers ---------------------------------------------------------------------------
    def occupancy(self, x: int) -> int:
        """The ``k``-bit mask of the chunks a packed state holds (cached)."""
        occ = self._occ.get(x)
        if occ is None:
            if self.g * self.k > _WIDE_BITS:
                occ = self._int(self._bits(x).any(axis=1))
            else:
                occ = 0
                for r in range(self.k):
                    if (x >> (r * self.g)) & self.row_mask:
                        occ |= 1 << r
            self._occ[x] = occ
        return occ

    def _rows_mask(self, rows: int) -> int:
        m = self._expand.get(rows)
        if m is None:
            m = 0
            for r in range(self.k):
                if rows >> r & 1:
                    m |= self.row_mask << (r * self.g)
            self._expand[rows] = m
        return m

    # -- the rules ---------------------------------------------------------------------------
    def apply(self, state: tuple[int, ...], collective: Collective | str,
              groups: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
        """The post-state, or ``None`` when a premise fails for some group."""
        occ = tuple(self.occupancy(x) for x in state)
        out = self.apply_occ(state, occ, collective, groups)
        return None if out is None else out[0]

    def apply_occ(self, state: tuple[int, ...], occ: tuple[int, ...], collective: Collective | str,
                  groups: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """:meth:`apply` given the state's occupancies ``occ`` (one ``k``-bit mask per device); returns
        the post-state and its occupancies, or ``None`` when a premise fails for some group."""
        c = collective if type(collective) is Collective else Collective(collective)
        new, nocc = list(state), list(occ)
        if c is Collective.ALL_REDUCE or c is Collective.REDUCE or c is Collective.REDUCE_SCATTER:
            for g in groups:
                occ0 = occ[g[0]]
                acc = 0
                for d in g:
                    x = state[d]
                    if acc & x or occ[d] != occ0:
                        return None
                    acc |= x
                if c is Collective.ALL_REDUCE:
                    for d in g:
                        new[d] = acc
                elif c is Collective.REDUCE:
                    for d in g:
                        new[d], nocc[d] = 0, 0
                    new[g[0]], nocc[g[0]] = acc, occ0
                else:
                    rows = [r for r in range(self.k) if occ0 >> r & 1]
                    n = len(g)
                    if len(rows) % n:
                        return None
                    b = len(rows) // n
                    for i, d in enumerate(g):
                        sel = sum(1 << r for r in rows[i * b:(i + 1) * b])
                        new[d], nocc[d] = acc & self._rows_mask(sel), sel
        elif c is Collective.ALL_GATHER:
            for g in groups:
                seen, acc = 0, 0
                count = bin(occ[g[0]]).count("1")
                for d in g:
                    o = occ[d]
                    if seen & o or bin(o).count("1") != count:
                        return None
                    seen |= o
                    acc |= state[d]
                for d in g:
                    new[d], nocc[d] = acc, seen
        else:  # Broadcast
            for g in groups:
                root = state[g[0]]
                same = True
                for d in g[1:]:
                    x = state[d]
                    if x & ~root:
                        return None
                    same = same and x == root
                if same:
                    return None
                o = occ[g[0]]
                for d in g:
                    new[d], nocc[d] = root, o
        return tuple(new), tuple(nocc)
