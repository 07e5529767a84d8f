"""Inside an MPI program: make any failing rank abort the whole job, and no rank outlive its launcher.

``with abort_on_error(comm):`` prints the exception of a failing rank to
stderr and calls ``comm.Abort(1)``, so no other rank waits forever in a
collective (DESIGN.md, Testing).

Orphans.  :func:`meshplan.exec.runtime.launch.run_job` and ``run_mpi`` start
``mpiexec`` with a parent-death signal (``prctl(PR_SET_PDEATHSIG)``), so it
ends with the process that launched it, whatever killed that process (even
SIGKILL, which no handler sees).  hydra's proxies and the ranks are not its
direct children, so each rank also runs a watchdog (:func:`start_watchdog`,
started by :func:`abort_on_error`): a daemon thread that checks twice a second
that the launching process — named by :data:`LAUNCHER_ENV` as ``pid:start
time``, so a reused pid is not mistaken for it — still exists, and SIGKILLs its
own rank when it does not (a rank that cannot see its launcher at the start — another
host or pid namespace — runs no watchdog).

Lost messages.  ``comm.Abort`` may end the job before hydra has forwarded the failing rank's stderr
(seen under load: the launcher then read no output at all), so :func:`abort_on_error` also appends the
error line to the file named by :data:`ERRORS_ENV`, when ``run_job`` set one, and the launcher adds
what that file holds to its error (:func:`rank_errors`).

The launcher's side.  :func:`kill_tree` ends a job: it forwards a signal to ``mpiexec``'s process group,
waits a grace period, then SIGKILLs the group and every process that was below ``mpiexec``
(:func:`descendants`, read from ``/proc``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Iterator

__all__ = ["abort_on_error", "start_watchdog", "launcher_token", "process_alive", "set_parent_death_signal",
           "rank_errors", "descendants", "kill_tree", "LAUNCHER_ENV", "ERRORS_ENV", "WATCH_INTERVAL_S"]

#: environment variable naming the launching process (``pid:start time``) to the ranks' watchdogs
LAUNCHER_ENV = "MESHPLAN_LAUNCHER"
#: environment variable naming the file a failing rank appends its error line to before it aborts
ERRORS_ENV = "MESHPLAN_ERRORS_FILE"
#: seconds between two checks of the watchdog
WATCH_INTERVAL_S = 0.5
_PR_SET_PDEATHSIG = 1
_started = threading.Event()


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields and fields[0] in ("Z", "X"):  # a zombie has ended
        return None
    return fields[19] if len(fields) > 19 else None


def launcher_token(pid: int | None = None) -> str:
    """``pid:start time`` of process ``pid`` (default: this one), for :data:`LAUNCHER_ENV`."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid) or ''}"


def process_alive(token: str) -> bool:
    """Does the process of ``token`` (:func:`launcher_token`) still run?  True when it cannot be told (no
    /proc, a malformed token): a watchdog must never kill a healthy job."""
    pid, _, start = token.partition(":")
    if not pid.isdigit() or not start or not os.path.isdir("/proc"):
        return True
    return _start_time(int(pid)) == start


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """In a child before ``exec`` (``Popen(preexec_fn=…)``): receive ``sig`` when the parent dies.  Linux only;
    elsewhere nothing happens.  Exits at once when the parent died before the call."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # the parent is already gone (we were reparented)
        os._exit(1)


def start_watchdog(token: str | None = None, interval_s: float = WATCH_INTERVAL_S) -> bool:
    """In a rank: SIGKILL this process once the launcher named by ``token`` (default ``$MESHPLAN_LAUNCHER``) has
    gone.  Returns whether a watchdog runs (once per process; none without a launcher to watch)."""
    token = token if token is not None else os.environ.get(LAUNCHER_ENV, "")
    if not token or _started.is_set():
        return _started.is_set()
    if not process_alive(token):  # not visible from here (another host or pid namespace): nothing to watch
        return False
    _started.set()

    def watch() -> None:
        while process_alive(token):
            time.sleep(interval_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="meshplan-watchdog", daemon=True).start()
    return True


@contextlib.contextmanager
def abort_on_error(comm) -> Iterator[None]:
    start_watchdog()
    try:
        yield
    except BaseException as err:  # noqa: BLE001 - any failure must abort the job
        if isinstance(err, SystemExit) and not err.code:
            raise
        line = f"rank {comm.Get_rank()}: {type(err).__name__}: {err}\n"
        sys.stderr.write(line)
        _append_error(line)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        comm.Abort(1)


def _append_error(line: str) -> None:
    """Append ``line`` to the :data:`ERRORS_ENV` file in one write (ranks may fail at once)."""
    path = os.environ.get(ERRORS_ENV)
    if not path:
        return
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)


def rank_errors(path: str) -> list[str]:
    """The error lines the failing ranks appended to ``path`` (none if it does not exist)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [ln.strip() for ln in fh if ln.strip()]
    except OSError:
        return []


# -- the launcher's side: end a job's whole process tree ------------------------------------

def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (hydra's proxies and ranks each start their own session, so the
    launcher's process group does not hold them); empty where ``/proc`` is missing."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - not Linux
        return set()
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _signal_all(pids: set[int], sig: int) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


def kill_tree(proc: subprocess.Popen, sig: int | None, grace_s: float) -> tuple[str, str]:
    """End a job: forward ``sig`` to ``mpiexec``'s process group (it passes it on to the ranks), wait
    ``grace_s`` seconds, then SIGKILL the group and every process that was below ``mpiexec``; returns the
    output read so far."""
    tree = descendants(proc.pid)
    if sig is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        tree |= descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    _signal_all(tree, signal.SIGKILL)
    try:
        return proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError):  # a process we could not see holds the pipes
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        proc.wait()
        return "", ""
