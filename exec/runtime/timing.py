"""The timing loop of every rank program: warm-up, repeats, the slowest rank's time, min and median.

Each repetition starts after a ``Barrier`` and is stamped with ``MPI.Wtime()``;
the time of a repetition is the slowest rank's (one ``Allreduce(MAX)`` over all
repetitions at the end, so the loop itself sends nothing between repetitions
but the barrier).  Warm-up runs are not timed.  Nothing here asserts a time.

* :func:`time_repeats` — one callable, ``repeats`` times → :class:`Timing`.
* :func:`time_steps` — a sequence of step callables (``None`` = nothing on this
  rank), stamped after every step → :class:`StepTiming` (per-step and total).
* :func:`time_interleaved` — several callables timed interleaved, so they share
  warm-up and noise → ``{name: Timing}``: two in alternating order (``a b``,
  ``b a``, …); three or more in a fresh order each repetition (``random.Random``
  seeded by the repetition's index, the same on every rank), so that no callable
  keeps one position or one predecessor (with ``a b c`` / ``c b a``, ``b``
  always ran second; in the tensor bench a callable that allocates a fresh
  output per call slowed its successors, and the baseline's A/A control read
  0.52–0.85).

``after`` (optional) runs after every timed repetition, outside the timed
region (e.g. to verify the result of each run).  ``setup`` (optional, for
:func:`time_repeats` and :func:`time_interleaved`) runs before every run,
outside the timed region, and its return value is passed to the timed callable
(a fresh copy of an input that the run overwrites, as an in-place factorization does).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

__all__ = ["Timing", "StepTiming", "time_repeats", "time_steps", "time_interleaved", "slowest"]


@dataclass(frozen=True, slots=True)
class Timing:
    """The slowest rank's time of every repetition (seconds); min and median are None without repeats."""

    times_s: tuple[float, ...]

    @property
    def min_s(self) -> float | None:
        return float(min(self.times_s)) if self.times_s else None

    @property
    def median_s(self) -> float | None:
        return float(np.median(self.times_s)) if self.times_s else None

    def to_json(self) -> dict:
        return {"min": self.min_s, "median": self.median_s}


@dataclass(frozen=True, slots=True)
class StepTiming:
    """Per repetition: the total (slowest rank's last stamp) and every step's time (differences of the
    slowest rank's cumulative stamps)."""

    total: Timing
    steps: tuple[Timing, ...]


def slowest(comm, local: np.ndarray) -> np.ndarray:
    """Element-wise maximum of ``local`` over the ranks of ``comm`` (collective)."""
    local = np.ascontiguousarray(local, dtype=np.float64)
    out = np.empty_like(local)
    getattr(comm, "comm", comm).Allreduce(local, out, MPI.MAX)
    return out


def _barrier(comm) -> None:
    getattr(comm, "comm", comm).Barrier()


def time_steps(comm, steps: Sequence[Callable[[], object] | None], *, repeats: int, warmup: int = 0,
               after: Callable[[], object] | None = None) -> StepTiming:
    """Run ``steps`` in order ``warmup`` + ``repeats`` times, stamping after every step (collective)."""
    n = len(steps)
    for _ in range(warmup):
        _barrier(comm)
        for op in steps:
            if op is not None:
                op()
    stamps = np.zeros((repeats, n))
    for rep in range(repeats):
        row = stamps[rep]
        _barrier(comm)
        t0 = MPI.Wtime()
        for i, op in enumerate(steps):
            if op is not None:
                op()
            row[i] = MPI.Wtime() - t0
        if after is not None:
            after()
    worst = slowest(comm, stamps)
    totals = worst[:, -1] if n else np.zeros(repeats)
    per = np.diff(np.concatenate([np.zeros((repeats, 1)), worst], axis=1), axis=1)
    return StepTiming(Timing(tuple(float(t) for t in totals)),
                      tuple(Timing(tuple(float(t) for t in per[:, i])) for i in range(n)))


def time_repeats(comm, fn: Callable[..., object], *, repeats: int, warmup: int = 1,
                 after: Callable[[], object] | None = None,
                 setup: Callable[[], object] | None = None) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` timed times (collective)."""
    if setup is None:
        return time_steps(comm, [fn], repeats=repeats, warmup=warmup, after=after).total
    timing = time_interleaved(comm, {"": fn}, repeats=repeats, warmup=warmup, setup=lambda _: setup(),
                              after=after)
    return timing[""]


def time_interleaved(comm, fns: Mapping[str, Callable[..., object]], *, repeats: int, warmup: int = 0,
                     setup: Callable[[str], object] | None = None,
                     after: Callable[[], object] | None = None) -> dict[str, Timing]:
    """Time every callable ``repeats`` times (collective): two callables in forward order on even and
    reverse order on odd repetitions, three or more in a seeded pseudo-random order per repetition (the
    same on every rank); ``warmup`` untimed rounds first.  With ``setup``, ``fns[name]`` is called with
    ``setup(name)``."""
    names = list(fns)

    def order(rep: int) -> list[str]:
        if len(names) <= 2:
            return names if rep % 2 == 0 else names[::-1]
        return random.Random(rep).sample(names, len(names))

    def once(name: str) -> float:
        args = () if setup is None else (setup(name),)
        _barrier(comm)
        t0 = MPI.Wtime()
        fns[name](*args)
        return MPI.Wtime() - t0

    for _ in range(warmup):
        for name in names:
            once(name)
    local = np.zeros((len(names), repeats))
    for rep in range(repeats):
        for name in order(rep):
            local[names.index(name), rep] = once(name)
            if after is not None:
                after()
    worst = slowest(comm, local)
    return {name: Timing(tuple(float(t) for t in worst[i])) for i, name in enumerate(names)}
