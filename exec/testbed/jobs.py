"""Run MPI jobs across the testbed's nodes (:mod:`meshplan.exec.testbed.net`).

:func:`on_testbed` is a context manager: the jobs that :mod:`meshplan.exec.runtime.launch` starts inside it
run ``mpiexec`` in the switch namespace with hydra's ``ssh`` launcher pointed at the testbed's launcher
script (which enters the node's namespaces instead of logging in), the testbed's host file and ``-ppn``
ranks per node, so rank ``r`` runs on node ``r // ppn``: the row-major device numbering of a system whose
outer levels are the testbed's racks and nodes.  Between nodes, MPICH's ch4 device uses its OFI netmod
with the ``tcp`` provider on the node's one interface; inside a node, its shared-memory transport.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

from meshplan.exec.runtime.launch import launch_through
from meshplan.exec.testbed.net import Topology, switch, state, state_dir
from meshplan.models.core.errors import ModelError

__all__ = ["on_testbed", "current", "check_system", "MPI_ENV"]

#: how MPICH crosses the testbed's links: OFI netmod, TCP provider, the node's interface (UCX, the wheel's
#: default netmod, finds every rank of the host through shared memory and would bypass the links)
MPI_ENV = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth1", "HYDRA_LAUNCHER": "ssh"}


def current() -> dict[str, Any]:
    """The state of the testbed that is up; :class:`ModelError` when none is."""
    doc = state()
    if doc is None:
        raise ModelError("no testbed is up: build one with meshplan.api.testbed.testbed_up(nodes, link) "
                         "(the command: meshplan testbed up)")
    return doc


def check_system(system: Any, np: int, doc: dict | None = None) -> int:
    """Ranks per node for ``np`` ranks on the testbed, checking that ``system``'s levels (when given) match it:
    its outer levels multiply to the number of nodes (the first one to the racks, with racks) and the
    remaining ones to the ranks per node."""
    doc = doc if doc is not None else current()
    t = Topology.from_dict(doc["topology"])
    if np % t.nodes:
        raise ModelError(f"np {np} does not split evenly over the testbed's {t.nodes} nodes", param="np")
    ppn = np // t.nodes
    if system is not None:
        sizes = tuple(system.sizes)
        cut = next((k for k in range(len(sizes) + 1) if math.prod(sizes[:k]) == t.nodes), None)
        ok = cut is not None and math.prod(sizes[cut:]) == ppn
        if ok and t.racks > 1:
            ok = any(math.prod(sizes[:k]) == t.racks for k in range(1, cut))
        if not ok:
            racks = f"{t.racks} racks of " if t.racks > 1 else ""
            raise ModelError(f"system {system.short()} does not match the testbed ({racks}{t.nodes} nodes × {ppn} "
                             f"ranks): its outer levels must multiply to the "
                             + ("racks, then to the nodes" if t.racks > 1 else "nodes")
                             + ", the inner ones to the ranks per node", param="system")
    return ppn


@contextlib.contextmanager
def on_testbed(np: int, system: Any = None) -> Iterator[dict]:
    """Jobs of ``np`` ranks started inside the block run across the testbed (``system`` is checked against
    it, see :func:`check_system`); yields the testbed's state."""
    doc = current()
    ppn = check_system(system, np, doc)
    sd = state_dir()
    args = ["-launcher", "ssh", "-launcher-exec", str(sd / "launch.sh"), "-f", str(sd / "hosts"), "-ppn", str(ppn)]
    with launch_through(("ip", "netns", "exec", switch()), args, MPI_ENV):
        yield doc
