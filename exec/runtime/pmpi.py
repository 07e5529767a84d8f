"""Counting bytes independently of Python: a PMPI interposition library loaded with ``LD_PRELOAD``.

The C source ``pmpi_counter.c`` (package data next to this module, with ``pmpi_wrappers.c`` that
:mod:`meshplan.exec.runtime.pmpi_gen` generates from the MPI library's own prototypes) wraps every
point-to-point, collective (blocking, nonblocking, persistent, v/w, neighborhood), partitioned and one-sided MPI
call, plain and MPI-4 large-count ``_c``, and counts per rank the bytes it sends to other ranks, the bytes it
receives from them (a receive by the size received, at completion) and, apart, the bytes of messages to itself.
The per-call rules ("direct algorithm" words of a collective, e.g. a Reduce_scatter receives (size−1)·|own
block|) are listed in docs/runtime.md.  So meshplan's own runs and foreign binaries are measured by one
instrument.

Use, outside MPI (the launcher side)::

    from meshplan.exec.runtime import pmpi
    env = pmpi.preload_env()                 # builds the library at first use; PmpiUnavailable if it cannot
    run_job(np, module, job, env=env)        # the ranks run with the counter preloaded

and inside a rank (``pmpi.active()`` says whether the counter is loaded)::

    before = pmpi.read()                     # (sent, received) bytes so far on this rank
    ...                                      # the MPI calls to measure
    sent, received = pmpi.diff(before)
    pmpi.read_self()                         # bytes this rank sent to itself (not in sent or received)

Build: ``gcc -shared -fPIC`` against the ``mpi.h`` and ``libmpi`` the ``mpich`` wheel installs next to the
running Python (``<prefix>/include``, ``<prefix>/lib``), into ``$XDG_CACHE_HOME/meshplan`` (default
``~/.cache/meshplan``), named by a hash of the sources and the MPI library, so a rebuild happens only when
either changes.  Without a C compiler or the wheel's header :class:`PmpiUnavailable` says what to install.
At ``MPI_Finalize`` each rank also writes ``rank<r>.txt`` ("sent received self") into ``$MESHPLAN_PMPI_DIR``
when that variable is set (for programs that cannot call :func:`read`, e.g. a C program): :func:`read_dir` reads
them.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from meshplan.models.core.errors import MeshplanError
from meshplan.models.core.outputs import atomic_path

__all__ = ["PmpiUnavailable", "source_path", "mpi_prefix", "build", "preload_env", "active", "read", "diff",
           "read_dir", "read_self", "handles", "LIB_ENV"]

#: environment variable naming the loaded library inside the ranks
LIB_ENV = "MESHPLAN_PMPI_LIB"


class PmpiUnavailable(MeshplanError):
    """The PMPI counter cannot be built here (no C compiler, no ``mpi.h``)."""


def source_path() -> Path:
    return Path(__file__).with_name("pmpi_counter.c")


def mpi_prefix() -> Path:
    """The prefix of the ``mpich`` wheel next to the running Python (holds include/mpi.h, lib/libmpi.so)."""
    for base in (Path(sys.prefix), Path(sys.executable).resolve().parent.parent):
        if (base / "include" / "mpi.h").exists() and any((base / "lib").glob("libmpi.so*")):
            return base
    raise PmpiUnavailable(f"no mpi.h and libmpi.so under {sys.prefix}; `pip install mpich` (the wheel ships them)")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "meshplan"


def build(*, force: bool = False) -> Path:
    """Compile the counter once (cached by content hash) and return the shared library's path."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc or shutil.which(cc) is None:
        raise PmpiUnavailable("no C compiler found to build the PMPI counter; install gcc "
                              "(Debian: apt-get install -y gcc) or set CC")
    prefix = mpi_prefix()
    lib = prefix / "lib"
    libmpi = next(p for p in (lib / "libmpi.so.12", lib / "libmpi.so") if p.exists())
    src = source_path().read_bytes() + source_path().with_name("pmpi_wrappers.c").read_bytes()
    tag = hashlib.sha256(src + str(libmpi.resolve()).encode() + str(libmpi.stat().st_size).encode()).hexdigest()[:16]
    out_dir = _cache_dir()
    out = out_dir / f"pmpi_counter-{tag}.so"
    if out.exists() and not force:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out, what="PMPI counter library") as tmp:  # compiled beside it, renamed when whole
        cmd = [cc, "-O2", "-shared", "-fPIC", f"-I{prefix / 'include'}", "-o", str(tmp), str(source_path()),
               f"-L{lib}", "-lmpi", f"-Wl,-rpath,{lib}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise PmpiUnavailable(f"building the PMPI counter failed: {' '.join(cmd)}: {proc.stderr.strip()[:400]}")
    return out


def preload_env(*, directory: str | None = None) -> dict[str, str]:
    """The environment to pass to :func:`~meshplan.exec.runtime.launch.run_job` (``env=``) so every rank
    runs with the counter preloaded; ``directory`` also makes each rank write its totals at Finalize."""
    path = str(build())
    pre = os.environ.get("LD_PRELOAD", "")
    env = {"LD_PRELOAD": f"{path}:{pre}" if pre else path, LIB_ENV: path}
    if directory is not None:
        env["MESHPLAN_PMPI_DIR"] = str(directory)
    return env


_lib = None


def _handle():
    global _lib
    if _lib is None:
        path = os.environ.get(LIB_ENV)
        if not path or path not in os.environ.get("LD_PRELOAD", ""):
            return None
        lib = ctypes.CDLL(path)
        for name in ("meshplan_pmpi_sent", "meshplan_pmpi_received", "meshplan_pmpi_self"):
            getattr(lib, name).restype = ctypes.c_longlong
        _lib = lib
    return _lib


def active() -> bool:
    """Inside a rank: is the counter preloaded?"""
    return _handle() is not None


def read() -> tuple[int, int] | None:
    """Inside a rank: ``(sent, received)`` bytes counted so far, or None without the counter."""
    lib = _handle()
    if lib is None:
        return None
    return int(lib.meshplan_pmpi_sent()), int(lib.meshplan_pmpi_received())


def read_self() -> int | None:
    """Inside a rank: bytes this rank sent to itself so far (messages, neighbour edges and one-sided calls whose
    peer is the rank itself; counted apart from :func:`read`), or None without the counter."""
    lib = _handle()
    return None if lib is None else int(lib.meshplan_pmpi_self())


def handles() -> dict[str, int] | None:
    """Inside a rank: the MPI handles this process created and freed so far (communicators, committed
    datatypes, windows; the C file's header lists the calls), or None without the counter."""
    lib = _handle()
    if lib is None:
        return None
    out = (ctypes.c_longlong * 6)()
    lib.meshplan_pmpi_handles(out)
    names = ("comms_created", "comms_freed", "types_committed", "types_freed", "windows_created", "windows_freed")
    return dict(zip(names, (int(x) for x in out)))


def diff(before: tuple[int, int] | None) -> tuple[int, int] | None:
    """``read() − before`` (None without the counter)."""
    now = read()
    if now is None or before is None:
        return None
    return now[0] - before[0], now[1] - before[1]


def read_dir(directory: str, np_: int) -> list[tuple[int, int, int]]:
    """The ``(sent, received, self)`` totals the ranks wrote at Finalize into ``directory``."""
    out = []
    for r in range(np_):
        path = Path(directory) / f"rank{r}.txt"
        if not path.exists():
            raise MeshplanError(f"rank {r} wrote no PMPI counts to {path} (did it reach MPI_Finalize?)")
        s, rcv, own = path.read_text().split()
        out.append((int(s), int(rcv), int(own)))
    return out
