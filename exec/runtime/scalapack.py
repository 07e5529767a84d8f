"""The ScaLAPACK bridge: run Debian's ScaLAPACK (pdgemm, pdgetrf, pdpotrf, …) inside meshplan's MPI ranks.

Outside MPI (launcher side):

* :func:`library` — the path of a ScaLAPACK shared library usable next to the ``mpich`` wheel, or
  :class:`ScalapackUnavailable` with what to install.  Debian's ``libscalapack-mpich.so.2.2`` links Debian's
  ``libmpich.so.12``; loading it next to the wheel's MPI would put two MPI libraries in one process (right
  results, ~30× slower), so :func:`library` makes a private copy in ``~/.cache/meshplan`` whose
  ``libmpich.so.12`` dependency is rewritten with ``patchelf --replace-needed`` to the wheel's
  ``libmpi.so.12`` (the same MPICH ABI).  ``$MESHPLAN_SCALAPACK_LIB`` overrides the search.
* :func:`rank_env` — the environment to give :func:`~meshplan.exec.runtime.launch.run_job` (``env=``):
  the library path and ``OPENBLAS_NUM_THREADS=1``.
* :data:`INSTALL_HINT` — the commands that install everything (Debian; ``.ci/run`` runs them).

Inside a rank: :func:`load` (the library through ``scalapack4py``, symbols global), :func:`load_in` (the
same inside a user's MPI program started without the launcher's environment: collective, one verdict for
every rank), :func:`grid` (a BLACS process grid over the first ``nprow·npcol`` ranks of ``COMM_WORLD`` or of
a given communicator, row-major), :func:`local_indices` (the global rows or
columns a process holds in a block-cyclic distribution, in local order) and :func:`descriptor` (a
ScaLAPACK array descriptor for a local, Fortran-ordered array).  Local arrays must be Fortran-ordered
(``np.asfortranarray``): ScaLAPACK is column-major.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from meshplan.models.core.errors import MeshplanError
from meshplan.models.core.outputs import atomic_path

__all__ = ["ScalapackUnavailable", "INSTALL_HINT", "library", "rank_env", "available", "load", "load_in", "Grid",
           "grid", "local_indices", "descriptor", "LIB_ENV"]

#: environment variable: the ScaLAPACK library the ranks load (set by :func:`rank_env`; a user override)
LIB_ENV = "MESHPLAN_SCALAPACK_LIB"
INSTALL_HINT = ("apt-get install -y libscalapack-mpich2.2 libopenblas0-serial patchelf && "
                "pip install 'meshplan[scalapack]' (scalapack4py)")
_DEBIAN = ("/usr/lib/x86_64-linux-gnu/libscalapack-mpich.so.2.2",
           "/usr/lib/aarch64-linux-gnu/libscalapack-mpich.so.2.2",
           "/usr/lib/x86_64-linux-gnu/libscalapack-mpich.so")


class ScalapackUnavailable(MeshplanError):
    """ScaLAPACK (or scalapack4py, or patchelf) is not installed here."""


def _wheel_libmpi() -> Path:
    for base in (Path(sys.prefix), Path(sys.executable).resolve().parent.parent):
        cand = base / "lib" / "libmpi.so.12"
        if cand.exists():
            return cand
    raise ScalapackUnavailable(f"the mpich wheel's libmpi.so.12 is not under {sys.prefix}; pip install mpich")


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["patchelf", "--print-needed", str(path)], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


def library() -> str:
    """A ScaLAPACK library whose MPI is the wheel's (bridged private copy, cached); see the module doc."""
    override = os.environ.get(LIB_ENV)
    if override:
        if not Path(override).exists():
            raise ScalapackUnavailable(f"{LIB_ENV}={override} does not exist")
        return override
    try:
        import scalapack4py  # noqa: F401
    except ImportError:
        raise ScalapackUnavailable(f"scalapack4py is not installed; {INSTALL_HINT}") from None
    src = next((Path(p) for p in _DEBIAN if Path(p).exists()), None)
    if src is None:
        raise ScalapackUnavailable(f"no ScaLAPACK library (libscalapack-mpich.so.2.2) found; {INSTALL_HINT}")
    if shutil.which("patchelf") is None:
        raise ScalapackUnavailable(f"patchelf is needed to bridge {src.name} to the wheel's MPI; {INSTALL_HINT}")
    mpi = _wheel_libmpi()
    tag = hashlib.sha256(f"{src.resolve()}:{src.stat().st_size}:{mpi}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "meshplan"
    out = cache / f"libscalapack-bridged-{tag}.so"
    if out.exists():
        return str(out)
    cache.mkdir(parents=True, exist_ok=True)
    with atomic_path(out, what="bridged ScaLAPACK library") as tmp:  # patched beside it, renamed when whole
        shutil.copyfile(src.resolve(), tmp)
        for dep in _needed(tmp):
            if dep.startswith("libmpich.so") or dep.startswith("libmpi.so"):
                proc = subprocess.run(["patchelf", "--replace-needed", dep, str(mpi), str(tmp)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise ScalapackUnavailable(f"patchelf failed on {src}: {proc.stderr.strip()[:300]}")
    return str(out)


def available() -> tuple[bool, str]:
    """``(True, path)`` or ``(False, why)``: can ranks run ScaLAPACK here?"""
    try:
        return True, library()
    except ScalapackUnavailable as err:
        return False, str(err)


def rank_env() -> dict[str, str]:
    """Environment for ranks that run ScaLAPACK (merge with e.g. :func:`~meshplan.exec.runtime.pmpi.preload_env`)."""
    return {LIB_ENV: library(), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


# -- inside a rank ---------------------------------------------------------------------------------

_loaded = None


def load(path: str | None = None):
    """Inside a rank: the ScaLAPACK library at ``path`` (default ``$MESHPLAN_SCALAPACK_LIB``, else
    :func:`library`) as a ``scalapack4py.ScaLAPACK4py``; loaded once per process."""
    global _loaded
    if _loaded is None:
        import ctypes

        from mpi4py import MPI  # noqa: F401 - MPI is initialized before BLACS
        from scalapack4py import ScaLAPACK4py

        path = path or os.environ.get(LIB_ENV) or library()
        _loaded = ScaLAPACK4py(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
    return _loaded


def load_in(comm):
    """Inside a user's MPI program (collective over ``comm``): rank 0 finds or bridges the library
    (:func:`library`), every rank loads it; :class:`ScalapackUnavailable` on every rank when it is absent."""
    ok, found = available() if comm.Get_rank() == 0 else (None, None)
    ok, found = comm.bcast((ok, found), root=0)
    if not ok:
        raise ScalapackUnavailable(found)
    return load(found)


@dataclass(frozen=True, slots=True)
class Grid:
    """A BLACS process grid: its context (−1 on ranks outside it) and this rank's coordinates."""

    ctx: int
    nprow: int
    npcol: int
    myrow: int
    mycol: int

    @property
    def inside(self) -> bool:
        return self.ctx >= 0 and self.myrow >= 0


def grid(sl, nprow: int, npcol: int, comm=None) -> Grid:
    """A row-major ``nprow × npcol`` BLACS grid over ranks ``0 … nprow·npcol−1`` of ``comm`` (default
    COMM_WORLD; collective over it).  Free it with ``sl.close_blacs_context(g.ctx)`` on the ranks inside."""
    usermap = np.arange(nprow * npcol, dtype=np.int32).reshape(nprow, npcol)
    # the Fortran interface's system context is the communicator's Fortran handle
    system = sl.get_default_system_context() if comm is None else comm.py2f()
    ctx = sl.make_blacs_context_from_map(system, usermap, nprow, npcol)
    if ctx < 0:
        return Grid(-1, nprow, npcol, -1, -1)
    _, _, r, c = sl.blacs_gridinfo(ctx)
    return Grid(ctx, nprow, npcol, r, c)


def local_indices(n: int, block: int, nprocs: int, iproc: int) -> np.ndarray:
    """Global indices (rows or columns) process ``iproc`` holds in a block-cyclic distribution of ``n`` in
    blocks of ``block`` over ``nprocs`` processes (source process 0), in local order (= ScaLAPACK numroc)."""
    idx = np.arange(n)
    return idx[(idx // block) % nprocs == iproc]


def descriptor(sl, g: Grid, rows: int, cols: int, mb: int, nb: int, local_rows: int):
    """A ScaLAPACK descriptor of a ``rows × cols`` matrix in ``mb × nb`` blocks on grid ``g`` whose local
    part has ``local_rows`` rows (the leading dimension, at least 1)."""
    return sl.make_blacs_desc(g.ctx, rows, cols, mb, nb, 0, 0, max(1, local_rows))
