"""Start ``mpiexec`` as a subprocess and bring back what rank 0 printed (DESIGN.md, Testing).

One launcher for every command that runs on MPI and for the tests:

* :func:`run_job` — the entry point capabilities use: writes ``job`` (a JSON
  document) into a per-run temporary directory, runs ``python -m module JOBFILE``
  on ``np`` ranks (the module calls :func:`meshplan.exec.runtime.rank.rank_main`)
  and returns the JSON document rank 0 printed as its last stdout line.  The
  directory is removed on every exit path (success, failure, timeout, signal).
* :func:`run_mpi` / :func:`run_mpi_json` — the same for any Python program
  (``argv`` after ``python``), e.g. an exported standalone script.

Lifecycle.  ``mpiexec`` (the one installed next to the running Python by the
``mpich`` wheel) starts in its own process group.  A job that outlives
``timeout_s`` is killed: the group and every process below ``mpiexec`` (hydra
starts its proxies and ranks in sessions of their own, so the group alone would
orphan them).  SIGINT, SIGTERM and SIGHUP that reach the launching process while
the job runs are forwarded to the group (``mpiexec`` passes them on to the
ranks); after :data:`GRACE_S` seconds whatever is left is killed the same way,
the temporary directory is removed, and the signal is delivered again to the
launching process with its previous handler (so Ctrl-C still raises :class:`KeyboardInterrupt` and SIGTERM still
ends the process).  A launching process that dies without a word (SIGKILL, a
crash) takes the job with it: ``mpiexec`` gets SIGTERM from the kernel when
its parent dies (``PR_SET_PDEATHSIG``), every rank's watchdog SIGKILLs the rank
(:mod:`meshplan.exec.runtime.guard`), and the job directory it left is removed
by the next :func:`run_job` (each holds an ``owner`` file naming its launcher).
Rank programs that fail call ``comm.Abort``
(:func:`meshplan.exec.runtime.guard.abort_on_error`), so one failing rank ends
the whole job with one :class:`MpiRunError`.

Rank limit.  ``np`` is checked against :func:`max_ranks`: by default four ranks
per core this process may run on (at least eight), raised or lowered with the
environment variable ``MESHPLAN_MAX_RANKS``; inside :func:`oversubscribe` (the
CLI's ``--oversubscribe``) there is no upper limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, NoReturn, Sequence

from meshplan.exec.runtime.guard import (ERRORS_ENV, LAUNCHER_ENV, kill_tree, launcher_token, process_alive,
                                         rank_errors, set_parent_death_signal)
from meshplan.models.core.errors import MeshplanError, ModelError, VerificationError
from meshplan.models.core.outputs import write_output

__all__ = ["MpiRunError", "MpiResult", "mpiexec_path", "run_job", "run_mpi", "run_mpi_json", "read_job",
           "max_ranks", "check_np", "oversubscribe", "remove_stale_jobs", "launch_through", "MAX_RANKS_ENV", "RANKS_PER_CORE", "GRACE_S", "MAX_TEST_RANKS"]

#: the CI machine has 2 cores; tests oversubscribe up to this many ranks
MAX_TEST_RANKS = 8
#: environment variable overriding :func:`max_ranks`
MAX_RANKS_ENV = "MESHPLAN_MAX_RANKS"
#: default rank limit per core
RANKS_PER_CORE = 4
#: seconds a job gets to end after a forwarded signal before its process group is killed
GRACE_S = 2.0
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP")
#: set by :func:`oversubscribe`: the rank limit is lifted for the jobs started inside it
_OVERSUBSCRIBE: contextvars.ContextVar[bool] = contextvars.ContextVar("meshplan_oversubscribe", default=False)
#: set by :func:`launch_through`: (command before ``mpiexec``, arguments after it, environment) of the jobs
#: started inside it (the emulated multi-node testbed of :mod:`meshplan.exec.testbed`)
_THROUGH: contextvars.ContextVar[tuple] = contextvars.ContextVar("meshplan_launch_through", default=((), (), {}))


@contextlib.contextmanager
def launch_through(prefix: Sequence[str] = (), args: Sequence[str] = (),
                   env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Jobs started inside the block run as ``PREFIX… mpiexec ARGS… -n N …`` with ``env`` added (e.g. enter a
    network namespace, a host file and a launcher); the lifecycle (timeout, signals, kill) is unchanged."""
    token = _THROUGH.set((tuple(prefix), tuple(args), dict(env or {})))
    try:
        yield
    finally:
        _THROUGH.reset(token)


class MpiRunError(VerificationError):
    """An MPI job failed, aborted or timed out."""


@dataclass(frozen=True)
class MpiResult:
    returncode: int
    stdout: str
    stderr: str


def mpiexec_path() -> str:
    """The ``mpiexec`` of the running Python's environment (mpich wheel), else PATH's."""
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpiexec.hydra", "mpirun"):
        cand = here / name
        if cand.exists():
            return str(cand)
    found = shutil.which("mpiexec")
    if found:
        return found
    raise MeshplanError("mpiexec not found; `pip install mpich mpi4py` provides it")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def max_ranks() -> int:
    """The most MPI ranks one job may start: ``$MESHPLAN_MAX_RANKS`` if set, else cores × 4 (at least
    :data:`MAX_TEST_RANKS`, so the test suite and the examples run on a one-core machine too)."""
    raw = os.environ.get(MAX_RANKS_ENV)
    if raw is None or not raw.strip():
        return max(RANKS_PER_CORE * _cores(), MAX_TEST_RANKS)
    try:
        value = int(raw)
    except ValueError:
        raise ModelError(f"{MAX_RANKS_ENV}={raw!r} is not a whole number") from None
    if value < 1:
        raise ModelError(f"{MAX_RANKS_ENV}={raw!r} must be at least 1")
    return value


@contextlib.contextmanager
def oversubscribe(allow: bool = True) -> Iterator[None]:
    """Jobs started inside the block may use more ranks than :func:`max_ranks` (the CLI's
    ``--oversubscribe``): the user asked for it, knowing the ranks will share cores."""
    token = _OVERSUBSCRIBE.set(bool(allow))
    try:
        yield
    finally:
        _OVERSUBSCRIBE.reset(token)


def check_np(np: int) -> None:
    """Raise :class:`ModelError` unless ``np`` is a number of ranks
    (:func:`~meshplan.models.core.checks.check_ranks`) within ``max_ranks()`` (no upper limit inside
    :func:`oversubscribe`)."""
    from meshplan.models.core.checks import check_ranks

    check_ranks(np, "np")
    if _OVERSUBSCRIBE.get():
        return
    limit = max_ranks()
    if np > limit:
        why = (f"{MAX_RANKS_ENV}={os.environ[MAX_RANKS_ENV]}" if os.environ.get(MAX_RANKS_ENV, "").strip()
               else f"{RANKS_PER_CORE} per core on {_cores()} cores, at least {MAX_TEST_RANKS}")
        raise ModelError(f"np {np} exceeds the limit of {limit} MPI ranks on this machine ({why}); "
                         f"pass oversubscribe or set {MAX_RANKS_ENV}={np} to run it anyway", param=("np", "oversubscribe"))


def run_job(np: int, module: str, job: Mapping[str, Any], *, timeout_s: float = 300.0,
            env: Mapping[str, str] | None = None, progress: Any = None) -> Any:
    """Run ``python -m module JOBFILE`` on ``np`` ranks and return the JSON rank 0 printed.

    ``job`` is written as JSON to a file in a fresh temporary directory (read by
    the ranks with :func:`read_job`, or by :func:`~meshplan.exec.runtime.rank.rank_main`);
    the directory is removed however the call ends.  Raises :class:`ModelError`
    for a bad ``np`` and :class:`MpiRunError` when a rank fails, the job times
    out or prints no JSON.  ``progress(done, total, what)``, when given, is called (from a
    thread) with what rank 0 reports through :meth:`~meshplan.exec.runtime.rank.RankContext.progress`.
    """
    check_np(np)
    remove_stale_jobs()
    tmp = tempfile.mkdtemp(prefix=f"{JOB_PREFIX}{module.rsplit('.', 1)[-1]}-")
    try:
        write_output(os.path.join(tmp, OWNER_FILE), launcher_token() + "\n", what="MPI job owner", fsync=False)
        path = os.path.join(tmp, "job.json")
        write_output(path, json.dumps(job), what="MPI job file", fsync=False)  # a private, fresh directory
        errors = os.path.join(tmp, "errors")
        env = {**(env or {}), ERRORS_ENV: errors}
        if progress is not None:
            env[PROGRESS_ENV] = os.path.join(tmp, "progress")
        with _polling(env[PROGRESS_ENV] if progress is not None else None, progress):
            try:
                return _parse_json(_run(np, ["-m", module, path], timeout_s=timeout_s, env=env, cwd=None))
            except MpiRunError as err:
                lost = [ln for ln in rank_errors(errors) if ln not in str(err)]
                if not lost:
                    raise
                raise MpiRunError(f"{err}; {' | '.join(lost)}") from None
    except _Interrupted as intr:
        shutil.rmtree(tmp, ignore_errors=True)  # now: the re-delivered signal may end the process
        intr.redeliver()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: job directories are ``$TMPDIR/meshplan-<module>-XXXX``, each with an ``owner`` file (``pid:start time``)
JOB_PREFIX, OWNER_FILE = "meshplan-", "owner"


def remove_stale_jobs(directory: str | None = None) -> list[str]:
    """Remove the job directories under ``directory`` (default: the temporary directory) whose launcher has
    gone (killed before it could clean up); returns their paths.  A directory without an ``owner`` file, or
    whose owner still runs, is left alone."""
    base = directory or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.name.startswith(JOB_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                with open(os.path.join(entry.path, OWNER_FILE)) as fh:
                    token = fh.read().strip()
            except OSError:
                continue
            if token and not process_alive(token):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


#: environment variable naming the file rank 0 writes its progress to (``done total what``)
PROGRESS_ENV = "MESHPLAN_PROGRESS_FILE"


@contextlib.contextmanager
def _polling(path: str | None, progress: Any) -> Iterator[None]:
    """While the job runs, read rank 0's progress file four times a second and call ``progress``."""
    if path is None:
        yield
        return
    stop = threading.Event()
    last = [""]

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            with open(path) as fh:
                text = fh.read()
            if text and text != last[0]:
                last[0] = text
                done, total, what = (text.rstrip("\n").split(" ", 2) + [""])[:3]
                progress(int(done), int(total), what)

    def poll() -> None:
        while not stop.wait(0.25):
            read()

    thread = threading.Thread(target=poll, name="meshplan-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1)
    read()  # the job's last report (done = total) once it ended normally


def run_mpi(np: int, argv: Sequence[str], *, timeout_s: float = 120.0,
            env: Mapping[str, str] | None = None, cwd: str | None = None) -> MpiResult:
    """Run ``mpiexec -n np python argv…`` and return its output.

    Raises :class:`MpiRunError` with the ranks' stderr tail when the job exits
    non-zero or exceeds ``timeout_s`` (the job is then killed, never left hanging).
    """
    check_np(np)
    try:
        return _run(np, argv, timeout_s=timeout_s, env=env, cwd=cwd)
    except _Interrupted as intr:
        intr.redeliver()


def run_mpi_json(np: int, argv: Sequence[str], **kw: Any) -> Any:
    """Run an MPI job whose rank 0 prints one JSON document as its last stdout line."""
    return _parse_json(run_mpi(np, argv, **kw))


def read_job(argv: Sequence[str] | None = None) -> Any:
    """Inside a rank: the job that :func:`run_job` wrote (path = first argument)."""
    args = sys.argv[1:] if argv is None else list(argv)
    with open(args[0]) as fh:
        return json.load(fh)


# -- the process ---------------------------------------------------------------------------------

class _Interrupted(BaseException):
    """A forwarded signal ended the job; :meth:`redeliver` hands it to the previous handler."""

    def __init__(self, signum: int, previous: Any) -> None:
        super().__init__(signum)
        self.signum, self.previous = signum, previous

    def redeliver(self) -> NoReturn:
        """Restore the previous handler and deliver the signal again: the default ends the process,
        Python's SIGINT handler raises :class:`KeyboardInterrupt`; a handler that returns gets an
        :class:`MpiRunError` (the job's result is lost either way)."""
        signal.signal(self.signum, self.previous if self.previous is not None else signal.SIG_DFL)
        os.kill(os.getpid(), self.signum)
        time.sleep(0.05)  # let the handler run (it raises, or ends the process)
        raise MpiRunError(f"MPI job interrupted by {signal.Signals(self.signum).name}; its ranks were ended")


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """While the job runs, SIGINT/SIGTERM/SIGHUP raise :class:`_Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    fired: list[int] = []

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        if fired:  # a second signal while the first is handled: the group is being killed already
            return
        fired.append(signum)
        raise _Interrupted(signum, previous.get(signum))

    for name in _FORWARDED:
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) == signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            if not fired or sig != fired[0]:
                signal.signal(sig, old)


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    full = dict(os.environ)
    full.setdefault("PYTHONUNBUFFERED", "1")
    full.setdefault("HYDRA_LAUNCHER", "fork")  # a hydra launcher on a single machine: fork, no ssh
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        full.setdefault(var, "1")  # ranks already oversubscribe the cores
    if env:
        full.update(env)
    full[LAUNCHER_ENV] = launcher_token()  # the ranks' watchdogs end them when this process is gone
    return full


def _run(np: int, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None,
         cwd: str | None) -> MpiResult:
    # `python -m meshplan…` would put the working directory first on sys.path; from a checkout's
    # root that finds the source folder `meshplan/` (which lacks the mapped layer packages)
    # instead of the installed package.  -P (Python ≥ 3.11) keeps it off; older Pythons start
    # in a neutral directory instead.
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    if not safe and cwd is None:
        cwd = tempfile.gettempdir()
    prefix, extra, through_env = _THROUGH.get()
    cmd = [*prefix, mpiexec_path(), *extra, "-n", str(np), sys.executable, *safe, *argv]
    env = {**(env or {}), **through_env} if through_env else env
    with _signals_raise():
        proc = None
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=_env(env), cwd=cwd, start_new_session=True,
                                    preexec_fn=set_parent_death_signal)
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _, err = kill_tree(proc, None, GRACE_S)
            raise MpiRunError(f"MPI job with {np} ranks timed out after {timeout_s:.0f} s and was killed; "
                              f"stderr tail: {_tail(err)}") from None
        except BaseException as exc:
            if proc is not None:
                kill_tree(proc, exc.signum if isinstance(exc, _Interrupted) else signal.SIGTERM, GRACE_S)
            raise
    if proc.returncode != 0:
        raise MpiRunError(f"MPI job with {np} ranks failed (exit {proc.returncode}): {_tail(err or out)}")
    return MpiResult(proc.returncode, out, err)


def _parse_json(res: MpiResult) -> Any:
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    if not lines:
        raise MpiRunError(f"MPI job printed nothing; stderr tail: {_tail(res.stderr)}")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as err:
        raise MpiRunError(f"MPI job did not print JSON: {lines[-1][:200]!r}") from err


def _tail(text: str, n: int = 6) -> str:
    """The end of a job's output for a one-line error: of the ranks' Python tracebacks only the exception
    lines, each once (frames and carets belong to a debugger, not to the error line)."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        kept = [ln.strip() for ln in lines if not ln.startswith((" ", "\t", "Traceback"))
                and not set(ln.strip()) <= set("^~ ")]
        lines = list(dict.fromkeys(kept)) or lines
    return " | ".join(lines[-n:]) if lines else "(no output)"
