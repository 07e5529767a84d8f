"""Bit masks as sets of small integers (devices of a reduction row, trace vertices of a window)."""

from __future__ import annotations

__all__ = ["bits"]


def bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask`` (≥ 0), ascending; walks the set bits only."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
