"""A third implementation of the Figure 8 rules, on numpy bit arrays, for fast re-checks (P2 §3.2, §3.5).

meshplan has three independent implementations of the collective rules:

* :mod:`meshplan.models.reduction.semantics` — the reference, one rule at a time with explanations
  (``meshplan check``, the test oracle);
* :mod:`meshplan.solvers.reduction.packed_semantics` — the synthesizer's (a device's whole state is one
  Python integer);
* this module — the re-check of synthesized programs: a context of ``g`` devices with ``k`` chunks is one
  ``uint64`` array of shape ``(g, k, W)`` (``W = ⌈g/64⌉`` words per row mask), and a step applies to all
  groups of equal size at once with array operations (premises by popcounts:
  contributions are disjoint iff the popcount of their ``or`` is the sum of their popcounts).

Re-checking with an implementation the search does not use means a bug in the search's rules cannot
certify its own output; ``tests/models/test_bitsets.py`` compares this module with the reference on
random programs.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Sequence

import numpy as np

from meshplan.models.core.collectives import Collective

__all__ = ["BitContexts"]


class BitContexts:
    """Interned contexts of ``g`` devices with ``k`` chunks, the transitions between them, and the rules."""

    def __init__(self, g: int, k: int) -> None:
        self.g, self.k = g, k
        self.words = max(1, -(-g // 64))
        self._ids: dict[bytes, list[int]] = {}  # digest of a context's bytes -> the contexts with it
        self.states: list[np.ndarray] = []
        self._moves: dict[tuple, int | None] = {}
        self._buckets: dict[int, tuple[object, list[np.ndarray]]] = {}
        self._initial: int | None = None
        self._goals: dict[object, int] = {}
        self._goal_refs: dict[int, object] = {}

    def intern(self, x: np.ndarray) -> int:
        """The number of context ``x`` (contexts are numbered in order of first sight).

        Contexts are keyed by a digest of their bytes, not the bytes themselves (a context of 512 devices
        with 512 chunks is 16 MiB), and a hit is confirmed by comparing the arrays."""
        x = np.ascontiguousarray(x)
        same = self._ids.setdefault(hashlib.blake2b(x.data, digest_size=16).digest(), [])
        for i in same:
            if np.array_equal(self.states[i], x):
                return i
        x.setflags(write=False)
        same.append(len(self.states))
        self.states.append(x)
        return len(self.states) - 1

    def encode(self, masks: Sequence[Sequence[int]]) -> int:
        """Intern a context given as row masks (``masks[d][r]``: bit ``c`` = contributor ``c``)."""
        x = np.zeros((self.g, self.k, self.words), dtype=np.uint64)
        for d, state in enumerate(masks):
            for r, m in enumerate(state):
                for w in range(self.words):
                    x[d, r, w] = (m >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
        return self.intern(x)

    def initial(self) -> int:
        """Every device holds its own contribution in every chunk."""
        if self._initial is None:
            self._initial = self.encode([[1 << d] * self.k for d in range(self.g)])
        return self._initial

    def goal(self, groups: Sequence[Sequence[int]]) -> int:
        """Every device holds, in every chunk, the sum over its group (others: their own)."""
        i = self._goals.get(id(groups))
        if i is not None and self._goal_refs[id(groups)] is groups:
            return i
        key = tuple(tuple(grp) for grp in groups)
        i = self._goals.get(key)  # type: ignore[call-overload]
        if i is None:
            masks: list[list[int]] = [[1 << d] * self.k for d in range(self.g)]
            for grp in key:
                m = sum(1 << d for d in grp)
                for d in grp:
                    masks[d] = [m] * self.k
            i = self._goals[key] = self.encode(masks)  # type: ignore[index]
        self._goals[id(groups)] = i  # type: ignore[index]
        self._goal_refs[id(groups)] = groups  # the reference pins the id
        return i

    def _by_size(self, groups: tuple[tuple[int, ...], ...]) -> list[np.ndarray]:
        hit = self._buckets.get(id(groups))
        if hit is not None and hit[0] is groups:
            return hit[1]
        sizes: dict[int, list[tuple[int, ...]]] = defaultdict(list)
        for grp in groups:
            sizes[len(grp)].append(grp)
        out = [np.array(v, dtype=np.intp) for v in sizes.values()]
        self._buckets[id(groups)] = (groups, out)  # the reference pins the id
        return out

    def advance(self, cur: int, collective: Collective, groups: tuple[tuple[int, ...], ...]) -> int | None:
        """The context after one step from context ``cur``, or ``None`` when a premise fails."""
        key = (cur, collective, id(groups))
        if key in self._moves:
            return self._moves[key]
        self._by_size(groups)  # pins ``groups`` so the id in the key stays unique
        x = self.states[cur].copy()
        ok = all(self._apply(x, self.states[cur], Collective(collective), G) for G in self._by_size(groups))
        nxt = self.intern(x) if ok else None
        self._moves[key] = nxt
        return nxt

    def _apply(self, x: np.ndarray, pre: np.ndarray, c: Collective, G: np.ndarray) -> bool:
        """Apply ``c`` to the groups ``G`` (shape ``(groups, n)``) of ``pre``, writing into ``x``."""
        xg = pre[G]                                   # (groups, n, k, W)
        occ = (xg != 0).any(axis=3)                   # (groups, n, k): the chunks each member holds
        n = G.shape[1]
        if c.reduces:
            if not (occ == occ[:, :1]).all():
                return False
            acc = np.bitwise_or.reduce(xg, axis=1)    # (groups, k, W)
            if (np.bitwise_count(acc).sum(axis=(1, 2)) != np.bitwise_count(xg).sum(axis=(1, 2, 3))).any():
                return False                          # some chunk holds a contribution twice
            if c is Collective.ALL_REDUCE:
                x[G] = acc[:, None]
            elif c is Collective.REDUCE:
                x[G[:, 1:]] = 0
                x[G[:, 0]] = acc
            else:  # ReduceScatter: member i keeps block i of the held chunks, in chunk order
                held = occ[:, 0]                      # (groups, k)
                count = held.sum(axis=1)
                if (count % n).any():
                    return False
                rank = np.cumsum(held, axis=1) - 1
                owner = rank // np.maximum(count // n, 1)[:, None]
                keep = held[:, None, :] & (owner[:, None, :] == np.arange(n)[None, :, None])
                x[G] = np.where(keep[..., None], acc[:, None], np.uint64(0))
            return True
        if c is Collective.ALL_GATHER:
            counts = occ.sum(axis=2)
            if (counts != counts[:, :1]).any() or (occ.sum(axis=1) > 1).any():
                return False
            x[G] = np.bitwise_or.reduce(xg, axis=1)[:, None]
            return True
        root = xg[:, :1]                              # Broadcast
        if (xg & ~root).any() or (xg[:, 1:] == root).all(axis=(1, 2, 3)).any():
            return False
        x[G] = root
        return True
