"""An emulated multi-node machine on one Linux host (network namespaces, veth links shaped by tc) and the
glue that runs meshplan's MPI jobs across it (docs/testbed.md)."""

from meshplan.exec.testbed.jobs import MPI_ENV, check_system, current, on_testbed
from meshplan.exec.testbed.net import Link, TestbedError, Topology, down, namespaces, parse_link, status, up

__all__ = ["Link", "Topology", "TestbedError", "up", "down", "status", "namespaces", "parse_link", "on_testbed",
           "current", "check_system", "MPI_ENV"]
