"""A hierarchical machine on one Linux host: network namespaces joined by shaped veth links.

Every *node* is a network namespace ``mpl-nodeI`` holding one interface ``eth1``
(address ``10.77.0.(I+1)``), one end of a veth pair whose other end sits on a
bridge in the *switch* namespace ``mpl-switch``.  With racks, the nodes of rack
``R`` share the bridge ``rR``, joined to the top bridge by the veth pair
``uR``/``dR`` (the rack *uplink*).  Each end of every link has a token-bucket
filter (``tc qdisc … tbf``: the link's rate in each direction) and, where the
kernel has the ``netem`` qdisc, a ``netem`` delay above it.  Inside a node the
ranks share memory; between nodes, every byte crosses the shaped TCP links.
The MPI launcher (``mpiexec``) runs in the switch namespace, whose top bridge
has the address ``10.77.0.254``.

Nothing of the testbed lives in the host's own namespace: the bridges, veths and
qdiscs belong to the testbed's namespaces and go away with them.  :func:`down`
kills every process inside those namespaces, deletes them and removes the hosts
files (``/etc/netns/mpl-*``) and the state directory; :func:`up` first does the
same, so a testbed left behind by a crash is cleaned up by the next ``up``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshplan.models.core.errors import MeshplanError, ModelError
from meshplan.models.core.outputs import write_output

__all__ = ["Link", "Topology", "TestbedError", "up", "down", "status", "state", "namespaces", "parse_link",
           "prefix", "switch", "PREFIX_ENV", "STATE_DIR_ENV", "state_dir", "node_name"]

#: environment variable moving the state directory (default ``/run/meshplan-testbed``)
STATE_DIR_ENV = "MESHPLAN_TESTBED_DIR"
#: environment variable changing the namespaces' prefix (default ``mpl-``), so that two testbeds (a user's and
#: the test suite's) can exist side by side
PREFIX_ENV = "MESHPLAN_TESTBED_PREFIX"
_SUBNET = "10.77.0"
_HEAD = f"{_SUBNET}.254"
_IFACE = "eth1"
_MAX_NODES = 64


class TestbedError(MeshplanError):
    """A command that builds or removes the testbed failed (the message holds the command and its error)."""

    __test__ = False  # not a pytest class


def state_dir() -> Path:
    """Where the testbed keeps its state file, hosts file and launcher script."""
    return Path(os.environ.get(STATE_DIR_ENV, "/run/meshplan-testbed"))


def prefix() -> str:
    """Every namespace of the testbed starts with this (``mpl-``, or ``$MESHPLAN_TESTBED_PREFIX``)."""
    p = os.environ.get(PREFIX_ENV, "mpl-")
    if not re.fullmatch(r"[a-z][a-z0-9]{0,8}-", p):
        raise ModelError(f"{PREFIX_ENV}={p!r} must be a few lower-case letters or digits followed by '-'")
    return p


def switch() -> str:
    """The namespace of the bridges and of ``mpiexec``."""
    return prefix() + "switch"


def node_name(i: int) -> str:
    """The hostname of node ``i`` (its namespace is ``mpl-`` + this name)."""
    return f"node{i}"


@dataclass(frozen=True, slots=True)
class Link:
    """A shaped link: ``rate`` bits per second each way and one-way ``delay`` seconds."""

    rate: float
    delay: float = 0.0

    def tc_rate(self) -> str:
        return f"{int(round(self.rate))}bit"

    def __str__(self) -> str:
        from meshplan.models.core.units import format_seconds

        r = self.rate
        unit = next((u for u, s in (("Gbit", 1e9), ("Mbit", 1e6), ("Kbit", 1e3)) if r >= s), "bit")
        scale = {"Gbit": 1e9, "Mbit": 1e6, "Kbit": 1e3, "bit": 1}[unit]
        return f"{r / scale:g}{unit},{format_seconds(self.delay)}"


_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(bit|bps|b/s|bit/s)?\s*\Z", re.I)
_TIME = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*(us|µs|ms|s|ns)?\s*\Z", re.I)


def parse_link(text: str, what: str = "link") -> Link:
    """``RATE[,DELAY]`` as tc writes them: ``1Gbit,50us``, ``250Mbit,0.1ms``, ``100mbit`` (bits per second;
    ``bps`` is bytes per second, as in tc)."""
    parts = [p for p in str(text).split(",")]
    if len(parts) not in (1, 2):
        raise ModelError(f"{what} must be RATE or RATE,DELAY like 1Gbit,50us, got {text!r}", param=what)
    m = _RATE.match(parts[0])
    if not m:
        raise ModelError(f"{what}: bad rate {parts[0]!r}; write it like 1Gbit, 250Mbit or 100mbit", param=what)
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2).lower()]
    rate = float(m.group(1)) * scale * (8 if (m.group(3) or "").lower() == "bps" else 1)
    if not 1e5 <= rate <= 1e11:
        raise ModelError(f"{what}: rate {parts[0]!r} must be between 100Kbit and 100Gbit", param=what)
    delay = 0.0
    if len(parts) == 2:
        t = _TIME.match(parts[1])
        if not t:
            raise ModelError(f"{what}: bad delay {parts[1]!r}; write it like 50us or 0.2ms", param=what)
        delay = float(t.group(1)) * {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}[
            (t.group(2) or "").lower()]
        if not delay <= 1.0:  # before rounding: 1e400s is infinite and has no whole nanoseconds
            raise ModelError(f"{what}: delay {parts[1]!r} is more than a second", param=what)
        delay = round(delay * 1e9) / 1e9  # whole nanoseconds: 50us and 0.05ms are the same delay
        if delay > 1.0:
            raise ModelError(f"{what}: delay {parts[1]!r} is more than a second", param=what)
    return Link(rate, delay)


@dataclass(frozen=True, slots=True)
class Topology:
    """``nodes`` nodes, each on its own ``link``; with ``racks`` > 1, the nodes (consecutive numbers) split
    evenly into racks whose bridges reach the top bridge through ``uplink``."""

    nodes: int
    link: Link
    racks: int = 1
    uplink: Link | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, int) or not 2 <= self.nodes <= _MAX_NODES:
            raise ModelError(f"nodes must be a whole number from 2 to {_MAX_NODES}, got {self.nodes!r}",
                             param="nodes")
        if not isinstance(self.racks, int) or self.racks < 1 or self.nodes % self.racks:
            raise ModelError(f"racks must divide nodes ({self.nodes}), got {self.racks!r}", param="racks")
        if self.racks > 1 and self.uplink is None:
            raise ModelError("racks need an uplink (rate and delay of each rack's link to the top switch)",
                             param="uplink")
        if self.racks == 1 and self.uplink is not None:
            raise ModelError("an uplink needs racks > 1", param="uplink")

    def rack_of(self, node: int) -> int:
        return node // (self.nodes // self.racks)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "racks": self.racks,
                "link": {"rate_bit_s": self.link.rate, "delay_s": self.link.delay},
                "uplink": None if self.uplink is None else {"rate_bit_s": self.uplink.rate,
                                                            "delay_s": self.uplink.delay}}

    @classmethod
    def from_dict(cls, d: dict) -> "Topology":
        up_ = d.get("uplink")
        return cls(int(d["nodes"]), Link(d["link"]["rate_bit_s"], d["link"]["delay_s"]), int(d.get("racks", 1)),
                   None if up_ is None else Link(up_["rate_bit_s"], up_["delay_s"]))


# -- commands -----------------------------------------------------------------------------------

def _check_host() -> None:
    if not sys.platform.startswith("linux"):
        raise ModelError("the testbed needs Linux (network namespaces and tc)")
    if os.geteuid() != 0:
        raise ModelError("the testbed needs root: it creates network namespaces, veth links and tc qdiscs")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise ModelError(f"the testbed needs the `{tool}` command (iproute2 / util-linux)")


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(list(argv), capture_output=True, text=True)
    if check and res.returncode != 0:
        raise TestbedError(f"`{' '.join(argv)}` failed: {(res.stderr or res.stdout).strip()}")
    return res


def namespaces() -> list[str]:
    """The testbed's network namespaces that exist now (``ip netns list``)."""
    if shutil.which("ip") is None:
        return []
    out = _sh("ip", "netns", "list", check=False).stdout
    names = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
    return sorted(n for n in names if n.startswith(prefix()))


def _pids(ns: str) -> list[int]:
    out = _sh("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def down() -> dict[str, Any]:
    """Remove every trace of a testbed: kill its processes, delete its namespaces (with their links, bridges
    and qdiscs), remove its hosts files and state directory.  Returns what was removed; idempotent."""
    _check_host()
    killed: list[int] = []
    nss = namespaces()
    for _ in range(50):  # processes may fork while we kill: repeat until none are left
        pids = [p for ns in nss for p in _pids(ns) if p != os.getpid()]
        if not pids:
            break
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        killed += pids
        time.sleep(0.05)
    for ns in nss:
        _sh("ip", "netns", "delete", ns)
    etc = Path("/etc/netns")
    removed_files = []
    if etc.is_dir():
        for d in etc.iterdir():
            if d.name.startswith(prefix()):
                shutil.rmtree(d, ignore_errors=True)
                removed_files.append(str(d))
        with contextlib.suppress(OSError):
            etc.rmdir()  # only when empty: others' entries stay
    sd = state_dir()
    if sd.exists():
        shutil.rmtree(sd, ignore_errors=True)
        removed_files.append(str(sd))
    return {"namespaces": nss, "killed": sorted(set(killed)), "files": removed_files}


def _shape(ns: str, dev: str, link: Link, delay: bool) -> str | None:
    """tbf at ``link.rate`` on ``dev``'s egress, below a netem delay when asked and available; returns
    the reason the delay could not be applied (None when it was, or none was asked)."""
    # 256 KiB (or 2 ms at the rate): with 64 KiB, GSO packets and timer slack held a 1 Gbit/s link to
    # 58 MB/s of its 125; with 256 KiB a TCP stream gets 116 MB/s (and 29.8 of 31.25 MB/s at 250 Mbit/s)
    burst = max(256 * 1024, int(link.rate / 8 * 2e-3))
    tbf = ["tbf", "rate", link.tc_rate(), "burst", str(burst), "latency", "50ms"]
    if not delay or link.delay <= 0:
        _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", *tbf)
        return None
    usec = f"{link.delay * 1e6:.0f}us"
    res = _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem",
              "delay", usec, "limit", "100000", check=False)
    if res.returncode != 0:
        _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", *tbf)
        return (f"`tc qdisc add … netem delay {usec}` failed ({(res.stderr or res.stdout).strip()}): this kernel "
                "has no netem qdisc, so the delay is not applied (the link's own latency remains)")
    _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *tbf)
    return None


def up(topology: Topology) -> dict[str, Any]:
    """Build the testbed of ``topology`` (removing any earlier one first) and return its state."""
    _check_host()
    down()
    t = topology
    sd = state_dir()
    sd.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    try:
        sw_ns = switch()
        _sh("ip", "netns", "add", sw_ns)
        sw = ("ip", "-n", sw_ns)
        _sh(*sw, "link", "set", "lo", "up")
        _sh(*sw, "link", "add", "top", "type", "bridge")
        _sh(*sw, "addr", "add", f"{_HEAD}/24", "dev", "top")
        _sh(*sw, "link", "set", "top", "up")
        for r in range(t.racks if t.racks > 1 else 0):
            _sh(*sw, "link", "add", f"r{r}", "type", "bridge")
            _sh(*sw, "link", "set", f"r{r}", "up")
            _sh(*sw, "link", "add", f"u{r}", "type", "veth", "peer", "name", f"d{r}")
            _sh(*sw, "link", "set", f"u{r}", "master", f"r{r}", "up")
            _sh(*sw, "link", "set", f"d{r}", "master", "top", "up")
            for dev in (f"u{r}", f"d{r}"):  # rack → top and top → rack; the delay once, on the way up
                why = _shape(sw_ns, dev, t.uplink, delay=dev.startswith("u"))
                if why and why not in notes:
                    notes.append(why)
        for i in range(t.nodes):
            host = node_name(i)
            ns = prefix() + host
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh(*sw, "link", "add", f"n{i}", "type", "veth", "peer", "name", _IFACE, "netns", ns)
            bridge = f"r{t.rack_of(i)}" if t.racks > 1 else "top"
            _sh(*sw, "link", "set", f"n{i}", "master", bridge, "up")
            _sh("ip", "-n", ns, "addr", "add", f"{_SUBNET}.{i + 1}/24", "dev", _IFACE)
            _sh("ip", "-n", ns, "link", "set", _IFACE, "up")
            why = _shape(ns, _IFACE, t.link, delay=True)  # the node's transmit side (with the delay)
            _shape(sw_ns, f"n{i}", t.link, delay=False)  # its receive side
            if why and why not in notes:
                notes.append(why)
        _write_files(t)
    except BaseException:
        with contextlib.suppress(Exception):
            down()
        raise
    doc = {"topology": t.to_dict(), "head": _HEAD, "iface": _IFACE, "hostname": socket.gethostname(),
           "notes": notes, "created": time.time()}
    write_output(sd / "state.json", json.dumps(doc, indent=1) + "\n", what="testbed state", fsync=False)
    return doc


def _write_files(t: Topology) -> None:
    """``/etc/netns/<ns>/hosts`` (``ip netns exec`` mounts it over ``/etc/hosts``), the hydra host file and the
    launcher ``mpiexec`` runs instead of ssh."""
    me = socket.gethostname()
    lines = ["127.0.0.1 localhost", f"{_HEAD} {me} head"]
    lines += [f"{_SUBNET}.{i + 1} {node_name(i)}" for i in range(t.nodes)]
    for ns in [switch()] + [prefix() + node_name(i) for i in range(t.nodes)]:
        d = Path("/etc/netns") / ns
        d.mkdir(parents=True, exist_ok=True)
        write_output(d / "hosts", "\n".join(lines) + "\n", what="hosts file", fsync=False)
    sd = state_dir()
    write_output(sd / "hosts", "".join(f"{node_name(i)}\n" for i in range(t.nodes)), what="host file", fsync=False)
    script = sd / "launch.sh"
    # hydra's ssh launcher runs `LAUNCHER [-x …] HOST "COMMAND …"`: enter HOST's namespaces instead of ssh
    write_output(
        script,
        "#!/bin/sh\n"
        "# meshplan testbed: hydra's ssh launcher runs `launch.sh [-x ...] HOST COMMAND...`\n"
        "while [ \"${1#-}\" != \"$1\" ]; do shift; done\n"
        "host=$1; shift\n"
        "case $host in node[0-9]*) ;; *) echo \"meshplan testbed: unknown host $host\" >&2; exit 2 ;; esac\n"
        f"exec ip netns exec {prefix()}$host unshare --uts sh -c \"hostname $host && exec $*\"\n",
        what="launcher script", fsync=False)
    script.chmod(0o755)


def state() -> dict[str, Any] | None:
    """The state of the testbed that is up (None when none is)."""
    path = state_dir() / "state.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc


def status() -> dict[str, Any]:
    """What exists now: the state file, the namespaces, each link's qdiscs (with their byte counters) and the
    processes inside the testbed (those two need root; without it they are left empty)."""
    if not sys.platform.startswith("linux"):
        raise ModelError("the testbed needs Linux (network namespaces and tc)")
    doc = state()
    nss = namespaces() if os.geteuid() == 0 else []
    qdiscs = {}
    procs = {}
    for ns in nss:
        out = _sh("ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", check=False).stdout
        qdiscs[ns] = [_qdisc_line(block) for block in re.split(r"\n(?=qdisc )", out.strip())
                      if block.startswith("qdisc ") and " noqueue " not in block]
        procs[ns] = len(_pids(ns))
    return {"up": doc is not None and switch() in nss, "state": doc, "namespaces": nss, "qdiscs": qdiscs,
            "processes": procs}


def _qdisc_line(block: str) -> dict[str, Any]:
    first = block.splitlines()[0]
    m = re.search(r"Sent (\d+) bytes", block)
    dev = re.search(r" dev (\S+)", first)
    return {"dev": dev.group(1) if dev else "", "qdisc": first.split()[1], "spec": first,
            "sent_bytes": int(m.group(1)) if m else 0}
