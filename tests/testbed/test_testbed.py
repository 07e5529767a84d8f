"""The emulated multi-node testbed: up, status, an MPI job across its shaped links, down; nothing is left
behind (namespaces, links, qdiscs, processes, files), also after a crash.  Root only (CI runs as root).

The suite's testbed uses its own namespace prefix and state directory, so a testbed a user has up is left
alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("tc") is None,
    reason="the testbed needs root on Linux with iproute2")


@pytest.fixture()
def own_testbed(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPLAN_TESTBED_PREFIX", "mpt-")
    monkeypatch.setenv("MESHPLAN_TESTBED_DIR", str(tmp_path / "state"))
    yield tmp_path
    from meshplan.exec.testbed import down

    down()


def _host_view() -> dict:
    """What a testbed could leave behind in the host's own namespace and on disk."""
    def sh(*argv):
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    netns = sorted(ln.split()[0] for ln in sh("ip", "netns", "list").splitlines() if ln.strip())
    links = sorted(ln.split(":")[1].strip() for ln in sh("ip", "-o", "link", "show").splitlines())
    qdiscs = sorted(" ".join(ln.split()[:5]) for ln in sh("tc", "qdisc", "show").splitlines())
    # processes of this testbed: anything naming its namespaces, and hydra proxies started through a launcher
    # (other jobs on the machine fork theirs)
    procs = sorted(ln for ln in sh("ps", "-eo", "args").splitlines()
                   if "mpt-" in ln or ("hydra_pmi_proxy" in ln and "--launcher ssh" in ln))
    files = sorted(os.listdir("/etc/netns")) if os.path.isdir("/etc/netns") else []
    return {"netns": [n for n in netns if n.startswith("mpt-")], "links": links, "qdiscs": qdiscs,
            "procs": procs, "files": [f for f in files if f.startswith("mpt-")]}


def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "meshplan", *args, "--json"], capture_output=True, text=True,
                         timeout=120, cwd=tempfile.gettempdir())  # outside the checkout (its meshplan/ folder)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_up_run_down_leaves_nothing(own_testbed):
    before = _host_view()
    st = _cli("testbed", "up", "--nodes", "2", "--link", "200Mbit,50us")
    assert st["up"] and st["topology"]["nodes"] == 2
    assert sorted(st["namespaces"]) == ["mpt-node0", "mpt-node1", "mpt-switch"]
    shaped = {(ns, q["dev"]): q["qdisc"] for ns, qs in st["qdiscs"].items() for q in qs}
    assert shaped[("mpt-node0", "eth1")] in ("tbf", "netem") and shaped[("mpt-switch", "n1")] == "tbf"
    assert _cli("testbed", "up", "--nodes", "2", "--link", "200Mbit,50us")["namespaces"] == st["namespaces"]

    # an MPI job across the two nodes: ranks on their node's hostname, the bytes cross the shaped links
    from meshplan.exec.runtime.launch import run_mpi_json
    from meshplan.exec.testbed import on_testbed, status
    from meshplan.models.core.system import System

    sent0 = {q["dev"]: q["sent_bytes"] for q in status()["qdiscs"]["mpt-node0"]}["eth1"]
    prog = ("from mpi4py import MPI; import socket, json, numpy as np\n"
            "c = MPI.COMM_WORLD; x = np.full(1 << 17, c.rank, dtype=np.int64); y = np.empty_like(x)\n"
            "c.Allreduce(x, y); names = c.gather(socket.gethostname())\n"
            "if c.rank == 0: print(json.dumps([names, int(y[0])]))\n")
    with on_testbed(4, System.parse("node=2,gpu=2")):
        names, total = run_mpi_json(4, ["-c", prog], timeout_s=120)
    assert names == ["node0", "node0", "node1", "node1"] and total == 0 + 1 + 2 + 3
    sent1 = {q["dev"]: q["sent_bytes"] for q in status()["qdiscs"]["mpt-node0"]}["eth1"]
    assert sent1 - sent0 >= (1 << 20) / 2  # at least half the 1 MiB buffer left node 0 through its link

    down = _cli("testbed", "down")
    assert not down["up"] and down["namespaces"] == [] and sorted(down["removed"]["namespaces"]) == st["namespaces"]
    assert _host_view() == before
    assert not _cli("testbed", "down")["removed"]["namespaces"]  # idempotent


def test_next_up_cleans_a_crashed_testbed(own_testbed):
    before = _host_view()
    from meshplan.exec.testbed import Topology, parse_link, up

    up(Topology(2, parse_link("100Mbit")))
    # a process left running inside a node, as after a crash of the launcher
    orphan = subprocess.Popen(["ip", "netns", "exec", "mpt-node1", "sleep", "600"], start_new_session=True)
    st = _cli("testbed", "up", "--nodes", "4", "--link", "100Mbit,20us", "--racks", "2", "--uplink", "25Mbit")
    assert orphan.wait(timeout=10) != 0  # ended by the cleanup
    assert st["processes"]["mpt-node1"] == 0 and len(st["namespaces"]) == 5
    assert {q["dev"] for q in st["qdiscs"]["mpt-switch"]} >= {"u0", "d0", "u1", "d1", "n0", "n3"}
    _cli("testbed", "down")
    assert _host_view() == before


def test_bad_input_is_one_error_line(own_testbed):
    for args, words in ((["--nodes", "1"], "nodes"), (["--nodes", "4", "--link", "fast"], "rate"),
                        (["--nodes", "4", "--racks", "3", "--uplink", "1Gbit"], "racks"),
                        (["--nodes", "4", "--racks", "2"], "uplink")):
        out = subprocess.run([sys.executable, "-m", "meshplan", "testbed", "up", *args], capture_output=True,
                             text=True, timeout=60, cwd=tempfile.gettempdir())
        assert out.returncode == 2 and out.stderr.startswith("error:") and words in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_calibrate_and_run_across_the_testbed(own_testbed, tmp_path):
    """The loop of docs/testbed.md on 2 nodes × 2 ranks: calibrate across the links, plan on the calibrated
    file, run every program across the links (verified, measured and simulated times)."""
    _cli("testbed", "up", "--nodes", "2", "--link", "500Mbit")
    cal = tmp_path / "cal.json"
    doc = _cli("calibrate", "--testbed", "--system", "node=2,gpu=2", "--bytes", "4MiB", "--repeats", "1",
               "-o", str(cal))
    node = doc["levels"][0]
    assert node["links"][0]["kind"] in ("nic", "switch") and set(node["collectives"]) <= {
        "AllReduce", "ReduceScatter", "AllGather", "Reduce", "Broadcast"}
    # 4 MiB between two nodes crosses the shaped link: 500 Mbit/s = 62.5 MB/s (the 256 KiB burst and timer
    # slack allow a little more; on one machine without the testbed it is GB/s)
    idle = doc["calibration"]["levels"][0]["idle"]
    assert 0 < idle["bandwidth"] < 1.5 * 62.5e6
    sched = tmp_path / "s.json"
    out = subprocess.run([sys.executable, "-m", "meshplan", "solve", "placement", "--system", str(cal), "--axes",
                          "2,2", "--reduce", "1", "--bytes", "256KiB", "--max-size", "2", "--export", str(sched)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    run = _cli("run", str(sched), "--testbed", "--bytes", "256KiB", "--repeats", "1", "--placement", "0",
               "--program", "0,1,2")
    assert run["programs"] and all(p["verified"] for p in run["programs"])
    assert all(p["time_s"] > 0 and p["sim_time_s"] > 0 for p in run["programs"])


def test_testbed_checks_the_system_against_its_nodes(own_testbed):
    from meshplan.exec.testbed import Topology, check_system, parse_link, up
    from meshplan.models.core.errors import ModelError
    from meshplan.models.core.system import System

    up(Topology(4, parse_link("1Gbit"), racks=2, uplink=parse_link("250Mbit")))
    assert check_system(System.parse("rack=2,node=2,gpu=2"), 8) == 2
    assert check_system(System.parse("rack=2,node=2,socket=2,core=2"), 16) == 4
    for bad, np in (("node=4,gpu=2", 8), ("rack=4,node=1,gpu=2", 8), ("node=2,gpu=4", 8)):
        with pytest.raises(ModelError, match="does not match the testbed"):
            check_system(System.parse(bad), np)
    with pytest.raises(ModelError, match="does not split evenly"):
        check_system(None, 6)


def test_links_parse_as_tc_writes_them():
    from meshplan.exec.testbed import parse_link
    from meshplan.models.core.errors import ModelError

    assert parse_link("1Gbit,50us") == parse_link("1000mbit,0.05ms")
    assert parse_link("1Gbit,50us").rate == 1e9 and parse_link("1Gbit,50us").delay == pytest.approx(50e-6)
    assert parse_link("10MBps").rate == 80e6  # bytes per second, as tc reads "Bps"
    for bad in ("", "fast", "1Gbit,soon", "1Gbit,1us,2", "10bit", "1Tbit"):
        with pytest.raises(ModelError):
            parse_link(bad)
