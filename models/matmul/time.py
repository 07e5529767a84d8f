"""Modelled time of a schedule: latency per message, bandwidth per word, rate per flop (thesis ch. 3 and 4).

Kwasniewski's thesis (*Performance Modeling and Optimal Schedules for Data Oblivious Programs*) counts the I/O
cost Q (words) and the latency cost L (messages of the busiest rank) of a schedule (section 3.2.3,
optimization goals), trades one against the other with the rounds (section 3.6.3, "I/O–latency trade-off"),
and names the latency of the third dimension and the smaller local BLAS calls as what deeper grids and smaller
blocks cost (section 4.8); Solomonik et al.'s cost model, which it cites, adds the computation.  Here the
three are seconds: messages·α + words·(bytes per word)/bandwidth + flops/(flop rate).  A :class:`Rates` holds
the three constants of one machine, read from a :class:`~meshplan.models.core.system.System` measured by
``meshplan calibrate``: the latency and bandwidth of its slowest level that carries messages, and its measured
f64 matrix-multiply rate, with the inner dimension at which a matrix multiply runs at half that rate (the narrow
rank-``v`` updates of a factorization; :meth:`Rates.rate`).  :class:`TimeModel` is one candidate's time, split into
its three terms, so an explanation can say what each candidate costs and why the winner wins.

* :func:`cosma_time` — the COSMA schedule on grid ``[pm, pn, pk]`` in ``rounds`` slabs: per round a ring
  Allgatherv along j (pn − 1 messages) and along i (pm − 1), at the end a ring Reduce_scatter along l
  (pk − 1); the words of :func:`~meshplan.models.matmul.costs.cosma_max_words`; ``2·cm·cn·ck`` flops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, value
from meshplan.models.matmul.costs import cosma_max_words

__all__ = ["Rates", "TimeModel", "cosma_time", "OBJECTIVES", "check_objective"]

#: what a planner minimizes: the exact words per rank (the papers' criterion, the default) or modelled time
OBJECTIVES = ("words", "time")


def check_objective(objective: object) -> str:
    """``objective`` if it is one of :data:`OBJECTIVES`, else a ModelError naming the parameter."""
    if objective not in OBJECTIVES:
        raise ModelError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}", param="objective")
    return str(objective)


@dataclass(frozen=True, slots=True)
class Rates:
    """α = ``latency`` seconds per message, ``bandwidth`` bytes per second, γ = 1/``flop_rate`` seconds per
    flop (one rank while all compute); a matrix multiply of inner dimension ``k`` runs at
    ``flop_rate·k/(k + gemm_half_k)`` (:meth:`rate`; 0: every one at ``flop_rate``)."""

    latency: float
    bandwidth: float
    flop_rate: float
    gemm_half_k: float = 0.0

    def __post_init__(self) -> None:
        for name in ("latency", "bandwidth", "flop_rate", "gemm_half_k"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 or \
                    (name in ("bandwidth", "flop_rate") and x == 0):
                raise ModelError(f"rates: {name} must be a finite positive number, got {x!r}", param="system")

    def rate(self, k: float | None = None) -> float:
        """Flop/s of a matrix multiply of inner dimension ``k`` (``None``: ``flop_rate``): the half-performance
        form ``flop_rate·k/(k + gemm_half_k)`` (Hockney's r∞ and n½), with ``gemm_half_k`` fitted by calibrate
        against ``flop_rate``'s 512³ multiply."""
        if k is None or not self.gemm_half_k:
            return self.flop_rate
        if k <= 0:
            raise ModelError(f"rates: an inner dimension must be positive, got {k!r}", param="block")
        return self.flop_rate * k / (k + self.gemm_half_k)

    @classmethod
    def of(cls, system) -> "Rates":
        """The rates of a measured system: the largest latency and the smallest bandwidth over the links of its
        levels that carry messages (size > 1), and its ``flop_rate``."""
        if getattr(system, "flop_rate", None) is None:
            raise ModelError("system has no flop_rate: time the machine with calibrate, whose system file holds "
                             "latency, bandwidth and flop_rate", param="system")
        links = [ln for lv in system.levels if lv.size > 1 for ln in lv.links] or \
            [ln for lv in system.levels for ln in lv.links]
        if not links:
            raise ModelError("the system has no interconnect to read latency and bandwidth from", param="system")
        return cls(max(ln.latency for ln in links), min(ln.bandwidth for ln in links), float(system.flop_rate),
                   float(system.gemm_half_k or 0.0))


@value
class TimeModel(Value):
    """One candidate's modelled seconds: ``messages·α + words·itemsize/bandwidth + flops/rate(k)`` (``k`` the
    inner dimension of its multiplies, :meth:`Rates.rate`), and the counts behind each term (slowest rank)."""

    messages: int
    words: float
    flops: float
    latency_s: float
    bandwidth_s: float
    compute_s: float
    total_s: float

    @classmethod
    def of(cls, rates: Rates, messages: int, words: float, flops: float, itemsize: int,
           inner: float | None = None) -> "TimeModel":
        lat = messages * rates.latency
        bw = words * itemsize / rates.bandwidth
        fl = flops / rates.rate(inner)
        return cls(int(messages), float(words), float(flops), lat, bw, fl, lat + bw + fl)

    def describe(self) -> str:
        return (f"{self.total_s * 1e3:,.2f} ms = {self.messages:,} messages {self.latency_s * 1e3:,.2f} ms + "
                f"{self.words:,.0f} words {self.bandwidth_s * 1e3:,.2f} ms + {self.flops:,.3g} flops "
                f"{self.compute_s * 1e3:,.2f} ms")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def cosma_time(m: int, n: int, k: int, pm: int, pn: int, pk: int, rounds: int, rates: Rates,
               itemsize: int = 8) -> TimeModel:
    """The modelled time of the COSMA schedule (module docstring) on its largest local domain."""
    messages = rounds * ((pn - 1) + (pm - 1)) + (pk - 1)
    flops = 2 * _cdiv(m, pm) * _cdiv(n, pn) * _cdiv(k, pk)
    return TimeModel.of(rates, messages, cosma_max_words(m, n, k, pm, pn, pk), flops, itemsize)
