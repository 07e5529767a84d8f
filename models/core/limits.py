"""Size limits on inputs, each with the environment variable that raises it (DESIGN.md, "Errors").

An input larger than any real plan — a 20,000-step reduction program, a loop nest of 300 statements, a
system of 10¹⁰ devices, a 5,000-level system — is refused before the work starts with a message that says
the limit and how to raise it, instead of running for hours or exhausting memory.  Each limit is generous for
real inputs (a synthesized program has at most ``--max-size`` steps; the largest preset has 64 devices; the
thesis' loop nests have a handful of statements).

=================  =========  ==============================  ================================================
name               default    environment variable            what it bounds
=================  =========  ==============================  ================================================
``steps``          10,000     ``MESHPLAN_MAX_STEPS``          steps of one reduction program (check, run, …)
``statements``     64         ``MESHPLAN_MAX_STATEMENTS``     statements of one loop program (bound; the SOAP
                                                              analysis grows with its connected subgraphs)
``nesting``        200        ``MESHPLAN_MAX_NESTING``        depth of a loop program's syntax tree (operands
                                                              chained in one expression, nested loops, brackets)
``iterations``     1,000,000  ``MESHPLAN_MAX_ITERATIONS``     loop iterations ``count --verify`` executes per rank
``repeats``        10,000     ``MESHPLAN_MAX_REPEATS``        timed repetitions of one measurement (``--repeats``)
``levels``         64         ``MESHPLAN_MAX_LEVELS``         hardware levels of a system
``devices``        1,048,576  ``MESHPLAN_MAX_DEVICES``        devices of a system (2²⁰)
``placement``      65,536     ``MESHPLAN_MAX_PLACEMENT_DEVICES``  devices ``solve placement`` studies (linear work)
``group``          512        ``MESHPLAN_MAX_GROUP``          devices of one reduction group in synthesis (its
                                                              states grow with the group size cubed)
``input_bytes``    256 MiB    ``MESHPLAN_MAX_INPUT_BYTES``    bytes of one input file (:mod:`.files`)
``halo_transfers`` 100,000    ``MESHPLAN_MAX_HALO_TRANSFERS`` ranks plus block transfers of one halo exchange
                                                              (``tensor halo``; a 10-D grid of 2s has 2.6·10⁵)
=================  =========  ==============================  ================================================
"""

from __future__ import annotations

import os
from typing import NamedTuple

from meshplan.models.core.errors import ModelError

__all__ = ["Limit", "LIMITS", "limit", "check_limit", "check_memory"]


class Limit(NamedTuple):
    """A named limit: its default, the variable that overrides it, and the noun it counts."""

    default: int
    env: str
    noun: str


#: every limit, by name (the table of the module docstring)
LIMITS: dict[str, Limit] = {
    "steps": Limit(10_000, "MESHPLAN_MAX_STEPS", "steps"),
    "statements": Limit(64, "MESHPLAN_MAX_STATEMENTS", "statements"),
    "nesting": Limit(200, "MESHPLAN_MAX_NESTING", "levels of nesting (operands chained in one expression, "
                                                   "nested loops or brackets)"),
    "iterations": Limit(1_000_000, "MESHPLAN_MAX_ITERATIONS", "loop iterations"),
    "repeats": Limit(10_000, "MESHPLAN_MAX_REPEATS", "repetitions"),
    "levels": Limit(64, "MESHPLAN_MAX_LEVELS", "levels"),
    "devices": Limit(2**20, "MESHPLAN_MAX_DEVICES", "devices"),
    "placement": Limit(65_536, "MESHPLAN_MAX_PLACEMENT_DEVICES", "devices"),
    "group": Limit(512, "MESHPLAN_MAX_GROUP", "devices"),
    "input_bytes": Limit(256 * 2**20, "MESHPLAN_MAX_INPUT_BYTES", "bytes"),
    "halo_transfers": Limit(100_000, "MESHPLAN_MAX_HALO_TRANSFERS", "ranks and block transfers"),
}


def limit(name: str) -> int:
    """The limit ``name``: its environment variable when set to a positive integer, else its default."""
    lim = LIMITS[name]
    raw = os.environ.get(lim.env)
    if raw is None:
        return lim.default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ModelError(f"{lim.env} must be a positive integer, got {raw!r}")
    return value


def check_limit(name: str, count: int, what: str, *, param: str | None = None) -> None:
    """Raise :class:`ModelError` when ``count`` exceeds the limit ``name``; ``what`` names the input
    (e.g. ``"the program prog.txt"``), ``param`` the API parameter it came from, if any."""
    most = limit(name)
    if count > most:
        lim = LIMITS[name]
        raise ModelError(f"{what} has {count:,} {lim.noun}, more than the limit of {most:,}; set "
                         f"{lim.env}={count} to allow it", param=param)


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (``None`` where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - every Linux says
        return None


def check_memory(nbytes: int, what: str, advice: str) -> None:
    """Raise :class:`ModelError` when ``nbytes`` (a lower bound on what a job needs, e.g. every rank's
    buffers) exceed this machine's physical memory — checked before ``mpiexec`` starts, so ranks do not
    fail one by one with numpy's MemoryError.  ``what`` names the job, ``advice`` says what to change."""
    from meshplan.models.core.units import format_bytes

    total = physical_memory()
    if total is not None and nbytes > total:
        raise ModelError(f"{what} needs at least {format_bytes(nbytes)} of memory, more than this machine's "
                         f"{format_bytes(total)}; {advice}")
