"""Generate the PMPI counter's wrappers (``pmpi_wrappers.c``) from the MPI library's own prototypes.

``python -m meshplan.exec.runtime.pmpi_gen [--check]`` reads ``mpi_proto.h`` of the ``mpich`` wheel (the file
``mpi.h`` includes; :func:`meshplan.exec.runtime.pmpi.mpi_prefix` finds it), takes the exact prototype of every
point-to-point, collective (blocking, nonblocking, persistent, v/w, neighborhood), partitioned and one-sided (RMA)
function, plain and MPI-4 large-count ``_c``, and writes one wrapper per function that adds the call's words to
the counters and calls its ``PMPI_`` twin.  The per-call word rules are :data:`RULES` below (C statements on the
prototype's own parameter names, so a renamed parameter fails to compile instead of counting wrong); the
completion calls (Wait/Test families, Start/Startall, Request_free, matched probes and receives) and the handle
counters are written by hand in ``pmpi_counter.c``, which includes the generated file.

Every function of those families in the header must be in :data:`RULES`, :data:`HAND_WRITTEN` or
:data:`NO_DATA`; the generator refuses a header with one it does not know (a new MPI version must be read, not
silently left uncounted).  ``--check`` exits 1 when the committed file differs from what the header generates
(tests/exec/test_runtime.py runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

__all__ = ["RULES", "HAND_WRITTEN", "NO_DATA", "prototypes", "generate", "output_path"]

# Rule kinds: "now" counts at the call (blocking calls, nonblocking posts, RMA); "init" computes the words of a
# persistent request once and adds them at every MPI_Start; "recv" is a blocking receive counted by the size
# received (MPI_Get_count on its status); "irecv" a nonblocking (or persistent, "recv_init") receive counted
# when a Wait/Test completes it.  A rule sets S (bytes sent to other ranks), R (bytes received from other
# ranks) and X (bytes sent to itself).  Collectives see n_ (size) and me_ (rank) of an intracommunicator of two
# or more ranks (intercommunicator collectives are not counted); neighborhood collectives see the topology's
# in/out neighbour lists (nin_, src_, nout_, dst_).
_COLL, _NBR, _RMA, _P2P = "coll", "nbr", "rma", "p2p"

_GATHER = ("if (me_ == root) R = (n_ - 1) * (long long)recvcount * ts(recvtype); "
           "else S = (long long)sendcount * ts(sendtype);")
_GATHERV = ("if (me_ == root) R = SUMX(recvcounts, n_, me_) * ts(recvtype); "
            "else S = (long long)sendcount * ts(sendtype);")
_SCATTER = ("if (me_ == root) S = (n_ - 1) * (long long)sendcount * ts(sendtype); "
            "else R = (long long)recvcount * ts(recvtype);")
_SCATTERV = ("if (me_ == root) S = SUMX(sendcounts, n_, me_) * ts(sendtype); "
             "else R = (long long)recvcount * ts(recvtype);")
_BCAST = "if (me_ == root) S = (long long)count * ts(datatype); else R = (long long)count * ts(datatype);"
_ALLGATHER = "R = (n_ - 1) * (long long)recvcount * ts(recvtype); S = (long long)recvcount * ts(recvtype);"
_ALLGATHERV = "R = SUMX(recvcounts, n_, me_) * ts(recvtype); S = (long long)recvcounts[me_] * ts(recvtype);"
_ALLTOALL = ("R = (n_ - 1) * (long long)recvcount * ts(recvtype); "
             "S = sendbuf == MPI_IN_PLACE ? R : (n_ - 1) * (long long)sendcount * ts(sendtype);")
_ALLTOALLV = ("R = SUMX(recvcounts, n_, me_) * ts(recvtype); "
              "S = sendbuf == MPI_IN_PLACE ? R : SUMX(sendcounts, n_, me_) * ts(sendtype);")
_ALLTOALLW = ("for (int q = 0; q < n_; q++) if (q != me_) R += (long long)recvcounts[q] * ts(recvtypes[q]); "
              "if (sendbuf == MPI_IN_PLACE) S = R; else "
              "for (int q = 0; q < n_; q++) if (q != me_) S += (long long)sendcounts[q] * ts(sendtypes[q]);")
_REDUCE = ("if (me_ == root) R = (n_ - 1) * (long long)count * ts(datatype); "
           "else S = (long long)count * ts(datatype);")
_ALLREDUCE = "R = S = (n_ - 1) * (long long)count * ts(datatype);"
_RS = "R = (n_ - 1) * (long long)recvcounts[me_] * ts(datatype); S = SUMX(recvcounts, n_, me_) * ts(datatype);"
_RSB = "R = S = (n_ - 1) * (long long)recvcount * ts(datatype);"
_SCAN = "R = (long long)me_ * count * ts(datatype); S = (long long)(n_ - 1 - me_) * count * ts(datatype);"
# neighbourhood collectives: one block per in-edge and per out-edge; an edge to itself is X, MPI_PROC_NULL nothing
_N_IN = "for (int i = 0; i < nin_; i++) if (src_[i] != MPI_PROC_NULL && src_[i] != me_) R += {blk};"
_N_OUT = ("for (int j = 0; j < nout_; j++) if (dst_[j] != MPI_PROC_NULL) "
          "{{ if (dst_[j] == me_) X += {blk}; else S += {blk}; }}")
_N_ALLGATHER = (_N_IN.format(blk="(long long)recvcount * ts(recvtype)") + " "
                + _N_OUT.format(blk="(long long)sendcount * ts(sendtype)"))
_N_ALLGATHERV = (_N_IN.format(blk="(long long)recvcounts[i] * ts(recvtype)") + " "
                 + _N_OUT.format(blk="(long long)sendcount * ts(sendtype)"))
_N_ALLTOALLV = (_N_IN.format(blk="(long long)recvcounts[i] * ts(recvtype)") + " "
                + _N_OUT.format(blk="(long long)sendcounts[j] * ts(sendtype)"))
_N_ALLTOALLW = (_N_IN.format(blk="(long long)recvcounts[i] * ts(recvtypes[i])") + " "
                + _N_OUT.format(blk="(long long)sendcounts[j] * ts(sendtypes[j])"))
_SEND = "SEND1(comm, dest, (long long)count * ts(datatype));"
_RMA_PUT = "RMA1(win, target_rank, (long long)origin_count * ts(origin_datatype), 0);"
_RMA_GET = "RMA1(win, target_rank, 0, (long long)origin_count * ts(origin_datatype));"
_RMA_GACC = ("RMA1(win, target_rank, op == MPI_NO_OP ? 0 : (long long)origin_count * ts(origin_datatype), "
             "(long long)result_count * ts(result_datatype));")

#: base name (without MPI_ and _c) -> (family, kind, rule)
RULES: dict[str, tuple[str, str, str]] = {}


def _coll(base: str, rule: str, fam: str = _COLL) -> None:
    """A collective in its blocking, nonblocking (I…) and persistent (…_init) forms."""
    RULES[base] = (fam, "now", rule)
    RULES["I" + base[0].lower() + base[1:]] = (fam, "now", rule)
    RULES[base + "_init"] = (fam, "init", rule)


for _b, _r in {"Bcast": _BCAST, "Gather": _GATHER, "Gatherv": _GATHERV, "Scatter": _SCATTER,
               "Scatterv": _SCATTERV, "Allgather": _ALLGATHER, "Allgatherv": _ALLGATHERV, "Alltoall": _ALLTOALL,
               "Alltoallv": _ALLTOALLV, "Alltoallw": _ALLTOALLW, "Reduce": _REDUCE, "Allreduce": _ALLREDUCE,
               "Reduce_scatter": _RS, "Reduce_scatter_block": _RSB, "Scan": _SCAN, "Exscan": _SCAN}.items():
    _coll(_b, _r)
for _b, _r in {"Neighbor_allgather": _N_ALLGATHER, "Neighbor_allgatherv": _N_ALLGATHERV,
               "Neighbor_alltoall": _N_ALLGATHER,
               "Neighbor_alltoallv": _N_ALLTOALLV, "Neighbor_alltoallw": _N_ALLTOALLW}.items():
    _coll(_b, _r, _NBR)
for _b in ("Send", "Bsend", "Ssend", "Rsend"):
    RULES[_b] = (_P2P, "now", _SEND)
    RULES["I" + _b.lower()] = (_P2P, "now", _SEND)
    RULES[_b + "_init"] = (_P2P, "init", _SEND)
RULES["Psend_init"] = (_P2P, "init", "SEND1(comm, dest, (long long)partitions * count * ts(datatype));")
RULES["Recv"] = (_P2P, "recv", "")
RULES["Irecv"] = (_P2P, "irecv", "")
RULES["Recv_init"] = (_P2P, "recv_init", "")
RULES["Precv_init"] = (_P2P, "recv_init", "")
RULES["Sendrecv"] = (_P2P, "recv", "SEND1(comm, dest, (long long)sendcount * ts(sendtype));")
RULES["Sendrecv_replace"] = (_P2P, "recv", _SEND)
for _b, _r in {"Put": _RMA_PUT, "Accumulate": _RMA_PUT, "Get": _RMA_GET, "Get_accumulate": _RMA_GACC}.items():
    RULES[_b] = (_RMA, "now", _r)
    RULES["R" + _b.lower()] = (_RMA, "now", _r)
RULES["Fetch_and_op"] = (_RMA, "now", "RMA1(win, target_rank, op == MPI_NO_OP ? 0 : ts(datatype), ts(datatype));")
RULES["Compare_and_swap"] = (_RMA, "now", "RMA1(win, target_rank, 2 * ts(datatype), ts(datatype));")

#: written by hand in pmpi_counter.c (they complete or start requests, or receive matched messages)
HAND_WRITTEN = {"Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome", "Start",
                "Startall", "Request_free", "Mprobe", "Improbe", "Mrecv", "Imrecv",
                "Isendrecv", "Isendrecv_replace"}   # a receive and a send under a generalized request
#: functions of the same families that move no user data between ranks
NO_DATA = {"Barrier", "Ibarrier", "Barrier_init", "Probe", "Iprobe", "Reduce_local", "Pready", "Pready_range",
           "Pready_list", "Parrived", "Cancel", "Request_get_status", "Request_get_status_all",
           "Request_get_status_any", "Request_get_status_some", "Grequest_start", "Grequest_complete",
           "Test_cancelled", "Get_count", "Get_elements", "Get_elements_x"}

#: names that belong to the counted families (a header function matching one must be classified above)
_FAMILY = re.compile(r"^(I|R)?(Send|Bsend|Ssend|Rsend|Recv|Sendrecv|Probe|Mprobe|Mrecv|Psend|Precv|P(ready|arrived)|"
                     r"Bcast|Gather|Scatter|Allgather|Alltoall|Reduce|Allreduce|Scan|Exscan|Barrier|Neighbor_|"
                     r"Put|Get|Accumulate|Fetch_and_op|Compare_and_swap|Wait|Test|Start|Request_|Grequest_|Cancel)"
                     r"|^I(send|bsend|ssend|rsend|recv|sendrecv|probe|mprobe|mrecv|bcast|gather|scatter|allgather|"
                     r"alltoall|reduce|allreduce|scan|exscan|barrier|neighbor_)", re.I)
_NOT_COMM = re.compile(r"^(Get_(address|version|library_version|processor_name|hw_resource_info)|"
                       r"Request_c2f|Request_f2c|Request_toint|Request_fromint|Test_cancelled)$")


def prototypes(header: str) -> dict[str, str]:
    """``{name: "type name, …"}`` of every ``int MPI_…(…)`` prototype in ``header`` (mpi_proto.h's text)."""
    found = re.findall(r"^int (MPI_\w+)\((.*?)\)\s*(?:MPICH_\w+(?:\([^)]*\))?\s*)*;", header, re.M | re.S)
    return {name: " ".join(args.split()) for name, args in found}


def _base(name: str) -> str:
    stem = name[len("MPI_"):]
    return stem[:-2] if stem.endswith("_c") else stem


def _params(args: str) -> list[tuple[str, str]]:
    """``[(declaration, name), …]`` of a prototype's parameter list."""
    out = []
    for decl in (a.strip() for a in args.split(",")):
        if decl == "void":
            continue
        m = re.search(r"(\w+)\s*(\[\s*\])?$", decl)
        if not m:
            raise SystemExit(f"pmpi_gen: cannot read the parameter {decl!r}")
        out.append((decl, m.group(1)))
    return out


def _wrapper(name: str, args: str) -> str:
    fam, kind, rule = RULES[_base(name)]
    params = _params(args)
    names = [p for _, p in params]
    call = f"P{name}({', '.join(names)})"
    head = f"int {name}({args}) {{\n    long long S = 0, R = 0, X = 0;\n"
    ctx = {_COLL: "    COLL_CTX(comm) {{ {rule} }}\n", _NBR: "    NBR_CTX(comm) {{ {rule} }} NBR_END\n"}
    body = ctx.get(fam, "    {{ {rule} }}\n").format(rule=rule) if rule else ""
    if kind == "now":
        return head + body + f"    add3(S, R, X);\n    return {call};\n}}\n"
    if kind == "init":
        return head + body + (f"    int rc_ = {call};\n"
                              "    if (rc_ == MPI_SUCCESS) track(*request, T_FIXED, 1, -1, S, R, X);\n"
                              "    return rc_;\n}\n")
    if kind == "recv":
        return head + body + ("    add3(S, R, X);\n    MPI_Status own_;\n"
                              "    if (status == MPI_STATUS_IGNORE) status = &own_;\n"
                              f"    int rc_ = {call};\n"
                              "    if (rc_ == MPI_SUCCESS) count_recv(me_in(comm), status);\n    return rc_;\n}\n")
    persistent = 1 if kind == "recv_init" else 0
    return head + body + ("    add3(S, R, X);\n"
                          f"    int rc_ = {call};\n"
                          f"    if (rc_ == MPI_SUCCESS) track(*request, T_RECV, {persistent}, me_in(comm), 0, 0, 0);\n"
                          "    return rc_;\n}\n")


def generate(header: str, source: str = "mpi_proto.h") -> str:
    """The C text of every wrapper (raises SystemExit naming a function of a counted family with no rule)."""
    protos = prototypes(header)
    unknown = sorted(n for n in protos if _FAMILY.match(n[4:]) and not _NOT_COMM.match(_base(n))
                     and _base(n) not in RULES and _base(n) not in HAND_WRITTEN and _base(n) not in NO_DATA)
    if unknown:
        raise SystemExit(f"pmpi_gen: {source} declares communication calls with no counting rule: "
                         f"{', '.join(unknown)}; add them to RULES, HAND_WRITTEN or NO_DATA")
    missing = sorted(b for b in RULES if f"MPI_{b}" not in protos)
    if missing:
        raise SystemExit(f"pmpi_gen: {source} lacks {', '.join(missing)} (an MPI older than 4.1?)")
    wrapped = sorted(n for n in protos if _base(n) in RULES)
    out = [f"/* GENERATED by `python -m meshplan.exec.runtime.pmpi_gen` from {source}; do not edit.\n"
           f" * {len(wrapped)} wrappers; the rules are pmpi_gen.RULES, the helpers are in pmpi_counter.c. */\n"]
    out += [_wrapper(n, protos[n]) for n in wrapped]
    return "\n".join(out)


def output_path() -> Path:
    return Path(__file__).with_name("pmpi_wrappers.c")


def _header_path() -> Path:
    from meshplan.exec.runtime.pmpi import mpi_prefix

    return mpi_prefix() / "include" / "mpi_proto.h"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m meshplan.exec.runtime.pmpi_gen", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if pmpi_wrappers.c is not what the header gives")
    ap.add_argument("--header", help="mpi_proto.h to read (default: the mpich wheel's)")
    args = ap.parse_args(argv)
    header = Path(args.header) if args.header else _header_path()
    text = generate(header.read_text(), header.name)
    if args.check:
        same = output_path().exists() and output_path().read_text() == text
        print("pmpi_wrappers.c is up to date" if same else "pmpi_wrappers.c differs from what the header gives; "
              "rerun python -m meshplan.exec.runtime.pmpi_gen")
        return 0 if same else 1
    from meshplan.models.core.outputs import write_output

    write_output(output_path(), text, what="generated wrappers")
    print(f"wrote {output_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
