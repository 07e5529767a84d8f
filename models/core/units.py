"""Byte sizes, bandwidths and durations as users write them (``1GiB``, ``64MB``, ``4096``, ``100Gb/s``)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from meshplan.models.core.errors import ModelError, quote

__all__ = ["parse_bytes", "parse_bandwidth", "format_bytes", "format_seconds", "MAX_BYTES"]

#: the largest size :func:`parse_bytes` accepts (4 EiB; int64 byte counts stay exact below it)
MAX_BYTES = 2**62

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}


def parse_bytes(text: str | int) -> int:
    """``"1GiB" -> 1073741824``; plain integers are bytes; decimal units are powers of 10."""
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _UNITS:
            raise ModelError(f"bad size {text!r}; write bytes like 4096, 64MiB, 1GiB or 2GB")
        value = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])  # exact: no float overflow to inf
    if value <= 0:
        raise ModelError(f"size must be positive, got {text!r}")
    if value > MAX_BYTES:
        raise ModelError(f"size {quote(text)} is more than 2**62 bytes (4 EiB), larger than any memory; write "
                         "bytes like 4096, 64MiB, 1GiB or 2GB")
    return value



def format_bytes(n: float) -> str:
    """``n`` bytes in binary units with three significant digits (``1.5 GiB``)."""
    for unit, size in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def format_seconds(t: float) -> str:
    """``t`` seconds in s, ms or µs with three decimals."""
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.1f} µs"


def parse_bandwidth(value: Any) -> float:
    """``8e9``, ``"8GB/s"``, ``"100Gb/s"`` (bits) → bytes per second."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([KMGT]?)([Bb])(?:/s|ps)?\s*", str(value))
    if not m:
        raise ModelError(f"bad bandwidth {value!r}; write bytes/s like 8e9 or units like 8GB/s or 100Gb/s")
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]
    bits = m.group(3) == "b"
    return float(m.group(1)) * scale / (8 if bits else 1)
