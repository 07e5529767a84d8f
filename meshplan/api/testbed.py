"""An emulated multi-node machine on this Linux host (docs/testbed.md): network namespaces as nodes, veth
links shaped by ``tc`` between them, MPI jobs launched across them.

:func:`testbed_up` builds it (removing any earlier one), :func:`testbed_down` removes every trace of it,
:func:`testbed_status` reports what exists.  The ``testbed=True`` argument of :func:`~meshplan.api.calibration.calibrate`
and :func:`~meshplan.api.reduction_run.run_programs` runs their MPI job across it.  Root only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, freeze, value

__all__ = ["TestbedState", "testbed_up", "testbed_down", "testbed_status", "testbed_jobs"]


@value
class TestbedState(Value):
    """What exists: ``up`` (a testbed is built), its ``topology`` (nodes, racks, link and uplink rate in bits/s
    and delay in s), ``notes`` (what could not be applied, e.g. a delay on a kernel without netem), the
    ``namespaces``, per namespace its shaped ``qdiscs`` (device, kind, bytes sent) and the number of
    ``processes`` inside it, and after :func:`testbed_down` what was ``removed``."""

    up: bool
    topology: Mapping | None
    notes: tuple
    namespaces: tuple
    qdiscs: Mapping
    processes: Mapping
    removed: Mapping | None = None


def _state(removed: Mapping | None = None) -> TestbedState:
    from meshplan.exec.testbed import status

    st = status()
    doc = st["state"] or {}
    return TestbedState(bool(st["up"]), freeze(doc.get("topology")), tuple(doc.get("notes", ())),
                        tuple(st["namespaces"]), freeze(st["qdiscs"]), freeze(st["processes"]),
                        None if removed is None else freeze(removed))


def testbed_up(nodes: int, link: Any = "1Gbit,50us", *, racks: int = 1, uplink: Any = None) -> TestbedState:
    """Build a testbed of ``nodes`` node namespaces, each on a link of ``link`` (``"RATE,DELAY"`` as tc writes
    them, e.g. ``"1Gbit,50us"``); with ``racks`` > 1 the nodes split into racks whose switches reach the top
    one through ``uplink``.  Any earlier testbed is removed first."""
    from meshplan.exec.testbed import Topology, parse_link, up
    topo = Topology(nodes, parse_link(link, "link"), racks,
                    None if uplink is None else parse_link(uplink, "uplink"))
    up(topo)
    return _state()


def testbed_down() -> TestbedState:
    """Remove the testbed: its processes, namespaces (with their links and qdiscs) and files; idempotent."""
    from meshplan.exec.testbed import down

    removed = down()
    return _state(removed)


def testbed_status() -> TestbedState:
    """The testbed as it is now."""
    return _state()


def testbed_jobs(np: int | None, system: Any = None):
    """A context manager: the MPI jobs of ``np`` ranks that meshplan starts inside it run across the testbed
    that is up, rank ``r`` on node ``r // (np / nodes)``; ``system`` (a System, file or ``node=4,gpu=2``), when
    given, must match it (its outer levels multiply to the racks and nodes, the inner ones to the ranks per
    node)."""
    from meshplan.api.inputs import as_system
    from meshplan.exec.testbed import on_testbed
    from meshplan.models.core.checks import check_ranks

    shape = None if system is None else as_system(system)
    if np is None:
        if shape is None:
            raise ModelError("give np or system: the number of ranks to place on the testbed", param="np")
        np = shape.num_devices
    return on_testbed(check_ranks(np, "np"), shape)
