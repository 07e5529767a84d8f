"""The ScaLAPACK bridge: run Debian's ScaLAPACK (pdgemm, pdgetrf, pdpotrf, …) inside meshplan's MPI ranks.

Outside MPI (launcher side):

* :func:`library` — the path of a ScaLAPACK shared library usable next to the ``mpich`` wheel, or
  :class:`ScalapackUnavailable` with what to install.  Debian's ``libscalapack-mpich.so.2.2`` links Debian's
  ``libmpich.so.12``; loading it next to the wheel's MPI would put two MPI libraries in one process (right
  results, ~30× slower), so :func:`library` makes a private copy in ``~/.cache/meshplan`` whose
  ``libmpich.so.12`` dependency is rewritten with ``patchelf --replace-needed`` to the wheel's
  ``libmpi.so.12`` (the same MPICH ABI).  ``$MESHPLAN_SCALAPACK_LIB`` overrides the search.
* :func:`rank_env` — the environment to give :func:`~meshplan.exec.runtime.launch.run_job` (``env=``):
  the library path, ``OPENBLAS_NUM_THREADS=1`` and, from :func:`best_coretype`, the ``OPENBLAS_CORETYPE``
  that makes the baseline's OpenBLAS run the kernel of this CPU (the baseline ranks only).
* :func:`best_coretype` — the OpenBLAS kernel for this CPU: the architecture that numpy's (newer) OpenBLAS
  detects, when the baseline's OpenBLAS has that kernel (checked once in a subprocess; cached).
* :data:`INSTALL_HINT` — the commands that install everything (Debian; ``.ci/run`` runs them).

Inside a rank: :func:`load` (the library through ``scalapack4py``, symbols global), :func:`load_in` (the
same inside a user's MPI program started without the launcher's environment: collective, one verdict for
every rank), :func:`kernel` (the BLAS the loaded ScaLAPACK runs on and its kernel, for the JSON), :func:`grid` (a BLACS process grid over the first ``nprow·npcol`` ranks of ``COMM_WORLD`` or of
a given communicator, row-major), :func:`local_indices` (the global rows or
columns a process holds in a block-cyclic distribution, in local order) and :func:`descriptor` (a
ScaLAPACK array descriptor for a local, Fortran-ordered array).  Local arrays must be Fortran-ordered
(``np.asfortranarray``): ScaLAPACK is column-major.
"""

from __future__ import annotations

import functools
import hashlib
import json
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
           "grid", "local_indices", "descriptor", "LIB_ENV", "CORETYPE_ENV", "best_coretype", "kernel"]

#: environment variable: the ScaLAPACK library the ranks load (set by :func:`rank_env`; a user override)
LIB_ENV = "MESHPLAN_SCALAPACK_LIB"
#: environment variable: the kernel OpenBLAS runs (read once when the library loads)
CORETYPE_ENV = "OPENBLAS_CORETYPE"
INSTALL_HINT = ("apt-get install -y libscalapack-mpich2.2 libopenblas0-serial patchelf && "
                "pip install 'meshplan[scalapack]' (scalapack4py, threadpoolctl)")
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
    """Environment for ranks that run ScaLAPACK (merge with e.g. :func:`~meshplan.exec.runtime.pmpi.preload_env`):
    single-threaded BLAS (one rank per core, as meshplan's ranks) at this CPU's kernel (:func:`best_coretype`)."""
    env = {LIB_ENV: library(), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    core = best_coretype()
    if core:
        env[CORETYPE_ENV] = core
    return env


def _blas_of(entries: list[dict], baseline: bool) -> dict | None:
    """The OpenBLAS among threadpoolctl's ``entries``: numpy's (inside ``site-packages``) or the system's."""
    for e in entries:
        if e.get("internal_api") == "openblas" and ("site-packages" in e.get("filepath", "")) != baseline:
            return e
    return None


def _probe(lib: str, coretype: str | None) -> dict | None:
    """threadpoolctl's view of the OpenBLAS that ``lib`` loads, in a fresh process with ``coretype`` set."""
    env = {k: v for k, v in os.environ.items() if k != CORETYPE_ENV}
    if coretype:
        env[CORETYPE_ENV] = coretype
    code = ("import ctypes, json, sys; ctypes.CDLL(sys.argv[1]); "
            "from threadpoolctl import threadpool_info; print(json.dumps(threadpool_info()))")
    out = subprocess.run([sys.executable, "-c", code, lib], capture_output=True, text=True, env=env, timeout=60)
    return _blas_of(json.loads(out.stdout), True) if out.returncode == 0 and out.stdout.strip() else None


@functools.lru_cache(maxsize=None)
def best_coretype() -> str | None:
    """The ``OPENBLAS_CORETYPE`` for the baseline's ranks, or None to leave its own detection.

    The best kernel for this CPU is the one numpy's OpenBLAS (a recent release) detects, as threadpoolctl
    reports it; an older OpenBLAS (Debian's 0.3.21) may not recognise a newer CPU and fall back to an old
    kernel.  The baseline's OpenBLAS is asked (in a subprocess) whether it knows that kernel: if it does,
    that kernel is set; if not, its own choice stands.  A user's ``$OPENBLAS_CORETYPE`` wins."""
    if os.environ.get(CORETYPE_ENV):
        return os.environ[CORETYPE_ENV]
    try:
        import numpy  # noqa: F401 - its OpenBLAS is the reference
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    ref = _blas_of(threadpool_info(), False)
    want = ref.get("architecture") if ref else None
    if not want:
        return None
    try:
        got = _probe(library(), want)
    except (ScalapackUnavailable, OSError, subprocess.SubprocessError, ValueError):
        return None
    return want if got and str(got.get("architecture", "")).lower() == want.lower() else None


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


def kernel() -> dict:
    """Inside a rank, after :func:`load`: the BLAS the baseline runs on — ``{"blas", "version",
    "architecture", "coretype"}`` (threadpoolctl's view of the system OpenBLAS; ``architecture`` is the kernel
    it runs, ``coretype`` the ``OPENBLAS_CORETYPE`` it was given).  ``blas`` is ``"unknown"`` when the
    loaded BLAS is not an OpenBLAS threadpoolctl can see (e.g. the reference BLAS: slow)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"blas": "unknown (threadpoolctl is not installed)", "version": None, "architecture": None,
                "coretype": os.environ.get(CORETYPE_ENV)}
    e = _blas_of(threadpool_info(), True)
    if e is None:
        return {"blas": "unknown", "version": None, "architecture": None, "coretype": os.environ.get(CORETYPE_ENV)}
    return {"blas": e["filepath"], "version": e.get("version"), "architecture": e.get("architecture"),
            "coretype": os.environ.get(CORETYPE_ENV)}


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
