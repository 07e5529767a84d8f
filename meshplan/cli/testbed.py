"""``meshplan testbed up|down|status``: an emulated multi-node machine on this host (docs/testbed.md), and
``--testbed`` (:func:`add_testbed_flag`), which runs a verb's MPI job across it."""

from __future__ import annotations

import argparse

from meshplan.cli.common import add_common_flags, console, print_json
from meshplan.models.core.units import format_bytes

__all__ = ["register", "run", "add_testbed_flag", "testbed_jobs"]

EXAMPLES = """\
examples:
  meshplan testbed up --nodes 4 --link 1Gbit,50us
  meshplan testbed status
  meshplan testbed up --nodes 4 --link 1Gbit,50us --racks 2 --uplink 250Mbit,50us
  meshplan testbed down
"""


def add_testbed_flag(parser) -> None:
    """``--testbed`` (``args.testbed``): run the verb's MPI job across the testbed's nodes."""
    parser.add_argument("--testbed", action="store_true",
                        help="run the MPI job across the nodes of the testbed (`meshplan testbed up`; root only), "
                             "rank r on node r // (ranks per node)")


def testbed_jobs(args, *, np: int | None = None, system=None, schedule=None):
    """A context in which the verb's MPI jobs run across the testbed when ``args.testbed`` is set (else one that
    does nothing): ``np`` ranks (default ``args.np``, else the devices of ``system`` or of ``schedule``'s system),
    with ``system``'s levels checked against the testbed."""
    import contextlib

    if not getattr(args, "testbed", False):
        return contextlib.nullcontext()
    from meshplan.api.testbed import testbed_jobs as _jobs

    if schedule is not None and system is None:
        from meshplan.api.reduction_run import open_runnable

        system = open_runnable(schedule, system=args.system, axes=args.axes, reduce=args.reduce,
                               matrix=args.matrix).system
    np = np if np is not None else args.np if args.np is not None else system.num_devices if system else None
    return _jobs(np, system)


def register(sub) -> None:
    """Add the ``testbed`` verb and its actions ``up``, ``down`` and ``status``."""
    tb = sub.add_parser(
        "testbed", help="an emulated multi-node machine on this host (network namespaces, links shaped by tc)",
        description=(
            "Build, show or remove an emulated multi-node machine on this Linux host (root only): each node is "
            "a network namespace with its own hostname, joined to a switch by a veth link whose rate (and, where "
            "the kernel has netem, delay) tc shapes in each direction; optionally racks of nodes with a slower "
            "uplink. `run`, `calibrate`, `matmul --run`, `factor --run` and `redistribute --run` take "
            "--testbed to run their MPI job across it. `up` removes any earlier testbed first; `down` removes "
            "every namespace, link, qdisc, process and file of it."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = tb.add_subparsers(dest="action", metavar="<action>")
    p = actions.add_parser("up", help="build the testbed (removing any earlier one)", epilog=EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, required=True, help="number of nodes (network namespaces), 2 to 64")
    p.add_argument("--link", default="1Gbit,50us",
                   help="each node's link: RATE[,DELAY] as tc writes them (default 1Gbit,50us)")
    p.add_argument("--racks", type=int, default=1, help="split the nodes evenly into this many racks (default 1)")
    p.add_argument("--uplink", default=None, help="with --racks: each rack's link to the top switch, RATE[,DELAY]")
    add_common_flags(p, json_help="print the testbed's state as JSON")
    p.set_defaults(func=run)
    for name, text in (("down", "remove the testbed and everything it made"), ("status", "show the testbed")):
        q = actions.add_parser(name, help=text, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        add_common_flags(q, json_help="print the testbed's state as JSON")
        q.set_defaults(func=run)
    tb.set_defaults(func=lambda args: (tb.print_help(), 2)[1])


def run(args) -> int:
    """``meshplan testbed ACTION``: :mod:`meshplan.api.testbed`, then a summary or JSON."""
    from meshplan.api.testbed import testbed_down, testbed_status, testbed_up

    if args.action == "up":
        res = testbed_up(args.nodes, args.link, racks=args.racks, uplink=args.uplink)
    elif args.action == "down":
        res = testbed_down()
    else:
        res = testbed_status()
    if args.json:
        print_json(res.to_json())
        return 0
    _print(res, args.action)
    return 0


def _print(res, action: str) -> None:
    from rich.markup import escape

    con = console()
    if action == "down":
        rm = res.removed or {}
        con.print(f"testbed removed: {len(rm.get('namespaces', ()))} namespaces, {len(rm.get('killed', ()))} "
                  f"processes ended, {len(rm.get('files', ()))} files" + ("" if not res.namespaces else
                                                                           f"; still there: {res.namespaces}"))
        return
    if not res.up:
        con.print("no testbed is up" + (f" (namespaces left: {', '.join(res.namespaces)})" if res.namespaces else ""))
        return
    t = res.topology
    link = _link(t["link"])
    racks = (f" in {t['racks']} racks, uplink {_link(t['uplink'])}" if t["racks"] > 1 else "")
    con.print(f"[bold]testbed[/bold]: {t['nodes']} nodes (node0..node{t['nodes'] - 1}), link {link} each way{racks}")
    for ns in res.namespaces:
        shaped = ", ".join(f"{q['dev']}:{q['qdisc']} {format_bytes(q['sent_bytes'])} sent" for q in res.qdiscs[ns])
        con.print(f"  {ns}: {res.processes[ns]} processes; {escape(shaped) or 'no qdisc'}")
    for note in res.notes:
        con.print(f"[yellow]note[/yellow]: {escape(note)}")


def _link(d) -> str:
    from meshplan.exec.testbed import Link

    return str(Link(d["rate_bit_s"], d["delay_s"]))
