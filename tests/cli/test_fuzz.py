"""The error promise, enforced (DESIGN.md, Thin CLI): every verb on hundreds of bad inputs exits 2 with exactly one
``error: …`` line on stderr, or 0/1 with a verdict on stdout — never 70 (internal error), never a traceback, never
a hang.  The inputs are in :mod:`tests.cli.fuzz_cases` (≥ 30 kinds per verb); most run in process with
``meshplan.cli.main`` (fast), a few as ``python -m meshplan`` subprocesses, with a 60 s limit each.  The
subprocess tests also interrupt the command (SIGINT) during its imports and inside CP-SAT.
"""

from __future__ import annotations

import collections
import importlib.util
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

from meshplan.cli import main


def _load_cases():
    """tests/cli/fuzz_cases.py (a sibling module; the suite runs with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location("meshplan_fuzz_cases", Path(__file__).with_name("fuzz_cases.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fuzz = _load_cases()
CASES, UNPRIVILEGED, Case, F, O, materialize = (fuzz.CASES, fuzz.UNPRIVILEGED, fuzz.Case, fuzz.F, fuzz.O,
                                                fuzz.materialize)

LIMIT_S = int(os.environ.get("MESHPLAN_FUZZ_LIMIT_S", "60"))
NOBODY = 65534


class _Hang(BaseException):
    """Raised by SIGALRM in a case that ran over :data:`LIMIT_S` (a BaseException: ``except Exception`` in the
    CLI must not swallow it)."""


@pytest.fixture(scope="module")
def scratch():
    """A scratch directory everyone may enter (the mode-000 cases run with the effective uid of nobody), holding
    ``plan.json``, a valid exported schedule."""
    root = Path(tempfile.mkdtemp(prefix="meshplan-fuzz-"))
    root.chmod(0o755)
    (root / "out").mkdir()
    (root / "out").chmod(0o777)
    code = main(["solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "1",
                 "--max-size", "3", "--export", str(root / "plan.json"), "--json"])
    assert code == 0
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _argv(case: Case, scratch: Path) -> list[str]:
    return [materialize(a, scratch) if isinstance(a, (F, O)) else a for a in case.argv]


def run_in_process(argv: list[str], *, unprivileged: bool = False, env=()) -> tuple[object, str, str]:
    """``(exit code, stdout, stderr)`` of ``meshplan ARGV`` run in this process (with the variables ``env``
    set); the code is ``"hang"`` after :data:`LIMIT_S` seconds and ``"escaped: …"`` when an exception escaped
    ``main``."""
    with mock.patch.dict(os.environ, dict(env)):
        return _run(argv, unprivileged)


def _run(argv: list[str], unprivileged: bool) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT_S)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            if unprivileged:
                os.setegid(NOBODY)
                os.seteuid(NOBODY)
            try:
                code: object = main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 2
            finally:
                if unprivileged:
                    os.seteuid(0)
                    os.setegid(0)
    except _Hang:
        code = "hang"
    except BaseException as exc:  # noqa: BLE001 - recorded as the failure it is
        code = f"escaped: {type(exc).__name__}: {exc}"[:300]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def run_with_stdout(argv: list[str], where: str, cwd: Path) -> tuple[object, str, str]:
    """``meshplan ARGV`` as a subprocess whose stdout is /dev/full (``full``), closed (``closed``) or a pipe
    whose reader has gone (``pipe``): ``(exit code, "", stderr)``."""
    cmd = [sys.executable, "-m", "meshplan", *argv]
    if where == "pipe":
        read, write = os.pipe()
        os.close(read)  # nobody will read: the first write fails with EPIPE
        proc = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=LIMIT_S)
        os.close(write)
    elif where == "full":
        with open("/dev/full", "w") as full:
            proc = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=LIMIT_S)
    else:
        proc = subprocess.run(["/bin/sh", "-c", 'exec "$@" >&-', "sh", *cmd], stderr=subprocess.PIPE, text=True,
                              cwd=cwd, timeout=LIMIT_S)
    return proc.returncode, "", proc.stderr


#: pieces of a Python traceback (a rank's, say) that must not reach the user's error line
_FLATTENED = re.compile(r'File "[^"]+", line \d+|\^\^\^\^|Traceback \(most recent')


def broken_promise(code: object, out: str, err: str) -> str | None:
    """Why ``(code, out, err)`` breaks the error promise, or None when it keeps it."""
    if "Traceback" in out or "Traceback" in err:
        return "a traceback was printed"
    if _FLATTENED.search(err):
        return f"a traceback flattened into the error line: {err[:300]!r}"
    if "expected one argument" in err:  # every flag of the cases has its value: a negative one must reach it
        return f"argparse took a value for an option: {err[:300]!r}"
    if not isinstance(code, int):
        return str(code)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if code == 2:
        if len(lines) != 1 or len(errors) != 1:
            return f"exit 2 needs exactly one `error:` line on stderr, got {len(lines)} lines: {err[:300]!r}"
        if "internal error" in errors[0]:
            return f"an internal error: {errors[0][:300]}"
        return None
    if code in (0, 1):
        if errors and (len(lines) != 1 or code == 0):
            return f"exit {code} with an error: {err[:300]!r}"
        if not out.strip() and not errors:
            return f"exit {code} without a verdict on stdout"
        return None
    return f"exit {code}: {err[:300]!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_promise(case: Case, scratch):
    argv = _argv(case, scratch)
    if case.stdout:
        code, out, err = run_with_stdout(argv, case.stdout, scratch)
        if case.stdout == "pipe":  # the reader went away: quiet, 141 as common tools do
            assert (code, err) == (141, ""), (code, err[-500:])
            return
    else:
        code, out, err = run_in_process(argv, unprivileged=any(case.kind.startswith(k) for k in UNPRIVILEGED),
                                        env=case.env)
    if case.expect:
        assert code == 2 and case.expect in err, (code, err[-500:])
    why = broken_promise(code, out, err)
    assert why is None, f"meshplan {' '.join(a[:60] for a in argv)[:400]}: {why}"


def test_every_verb_gets_30_kinds():
    from meshplan.cli import VERBS

    kinds = collections.defaultdict(set)
    for c in CASES:
        kinds[c.verb].add(c.kind)
    assert set(VERBS) <= set(kinds)
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    thin = {v: len(k) for v, k in kinds.items() if v in VERBS and len(k) < 30}
    assert not thin, f"verbs with fewer than 30 input kinds: {thin}"


# -- as subprocesses: a sample of the cases, and Ctrl-C ---------------------------------------------------------

def _meshplan(argv, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "meshplan", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


#: cases also run as ``python -m meshplan`` (the process's own exit code and streams)
SUBPROCESS_CASES = ("run-bytes-1TiB", "check-prog-20000-txt", "bound-py-5000-terms-py", "solve-system-5000-levels",
                    "show-png-unknown-extension", "meshplan-no-verb")


@pytest.mark.parametrize("case", [c for c in CASES if c.id in SUBPROCESS_CASES], ids=lambda c: c.id)
def test_error_promise_in_a_subprocess(case: Case, scratch):
    proc = _meshplan(_argv(case, scratch), cwd=scratch)
    out, err = proc.communicate(timeout=LIMIT_S)
    why = broken_promise(proc.returncode, out, err)
    assert why is None, f"meshplan {case.id}: {why}"


#: a command that loads sympy and works for many seconds (so an interrupt always lands before it ends)
_LONG = ("bound", "--einsum", "ijkl,jkm,lmn->in", "--params",
         "N_i=300,N_j=300,N_k=300,N_l=300,N_m=300,N_n=300,S=1000", "--time-limit", "60")


#: a frame of meshplan's own code in a traceback (the editable-install finder's name only contains "meshplan")
_OWN_FRAME = re.compile(r'File "[^"]*/(meshplan|models|encodings|solvers|exec)/[^"]*"')


@pytest.mark.parametrize("delay", [0.3, 0.8, 1.5])
def test_ctrl_c_while_starting_is_one_line_and_130(delay, tmp_path):
    """From meshplan's first instruction on, Ctrl-C prints one line and exits 130.  Before it — the interpreter's
    own start-up (``site``, the editable-install finder), which takes over 0.3 s on a loaded machine — Python
    itself reports the interrupt; such an attempt is repeated with a later interrupt."""
    for attempt in range(4):
        proc = _meshplan(_LONG, cwd=tmp_path)  # not the checkout root: its source folders would shadow the install
        time.sleep(delay + 0.3 * attempt)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=LIMIT_S)
        if proc.returncode != 130 and "Traceback" in err and not _OWN_FRAME.search(err):
            continue  # interrupted before meshplan's code ran
        break
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err == "error: interrupted\n", err[-2000:]


_EXEC_INTERRUPT_SCRIPT = """
import sys
import meshplan.cli.bound as verb
from meshplan.cli import main

def interrupted_inside_exec(args):  # as when Ctrl-C lands while a dataclass is built during a lazy import
    exec("raise KeyboardInterrupt")

verb.run = interrupted_inside_exec
raise SystemExit(main(["bound", "--einsum", "ij,jk->ik"]))
"""


def test_ctrl_c_inside_exec_still_exits_130(tmp_path):
    """A KeyboardInterrupt that left an ``exec()`` makes CPython re-kill a ``python -m`` process with SIGINT
    at exit (status -2) unless the flag it set is cleared; the CLI's handler clears it.  Run as ``-m``, as
    ``python -m meshplan`` runs (``-c`` and scripts exit through another path that ignores the flag)."""
    (tmp_path / "interrupt_probe.py").write_text(_EXEC_INTERRUPT_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "interrupt_probe"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=LIMIT_S)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr == "error: interrupted\n", proc.stderr[-2000:]


_CPSAT_SCRIPT = """
import sys, time
from ortools.sat.python import cp_model
from meshplan.encodings.core.base import Encoded
from meshplan.solvers.backends.cpsat import CpSatBackend

# a Golomb ruler of 13 marks: minutes for CP-SAT to prove optimal
n, top = 13, 200
m = cp_model.CpModel()
x = [m.new_int_var(0, top, f"x{i}") for i in range(n)]
m.add(x[0] == 0)
for i in range(n - 1):
    m.add(x[i] < x[i + 1])
d = [x[j] - x[i] for i in range(n) for j in range(i + 1, n)]
m.add_all_different(d)
m.minimize(x[-1])
print("solving", flush=True)
t0 = time.perf_counter()
try:
    CpSatBackend().solve(Encoded("cpsat", m, {f"x{i}": v for i, v in enumerate(x)}, None, objective=True),
                         time_limit_s=120)
except KeyboardInterrupt:
    print(f"interrupted after {time.perf_counter() - t0:.1f} s", flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def test_ctrl_c_inside_cp_sat_is_reported_not_swallowed(tmp_path):
    """CP-SAT would catch SIGINT itself, stop, and return its best answer as if it had finished (``bound``
    interrupted there printed a result and exited 0); the backend lets the interrupt reach Python at once."""
    proc = subprocess.Popen([sys.executable, "-c", _CPSAT_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)  # outside the checkout, whose folders would shadow the install
    assert proc.stdout.readline().strip() == "solving"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 130, (out, err[-2000:])
    assert out.startswith("interrupted after"), out


# -- random inputs (hypothesis) --------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000))
def test_random_bytes_in_every_kind_of_input_file(data, scratch):
    for name, argv in (("r.json", ["check", "{}", "--no-proof", "--json"]),
                       ("r.json", ["export", "{}", "--format", "jax-mesh"]),
                       ("r.txt", ["check", "{}", *fuzz._TEXT_FLAGS, "--no-proof"]),
                       ("r.py", ["bound", "{}", "--no-tiles"]), ("r.py", ["count", "{}"]),
                       ("r.toml", ["solve", "placement", "--system", "{}", "--axes", "2,2", "--reduce", "1"])):
        path = scratch / "random" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        argv = [str(path) if a == "{}" else a for a in argv]
        why = broken_promise(*run_in_process(argv))
        assert why is None, f"meshplan {' '.join(argv)} on {data[:80]!r}: {why}"


@settings(max_examples=30, deadline=None)
@given(text=_TEXT)
def test_random_text_in_every_kind_of_flag(text):
    for argv in (["solve", "placement", f"--system={text}", "--axes", "2,2", "--reduce", "1", "--max-size", "2"],
                 ["solve", "placement", "--system", "node=2,gpu=2", f"--axes={text}", "--reduce", "0",
                  "--max-size", "2"],
                 ["redistribute", f"[{text}]", "[12]", "--mesh", "x=2"],
                 ["redistribute", "[12]", "[12]", f"--mesh={text}"],
                 ["bound", f"--einsum={text}", "--no-tiles"],
                 ["tensor", "halo", f"--partition={text}", "--shape", "1,1,8", "--kernel", "3"],
                 ["run", "/nonexistent/plan.json", f"--bytes={text}"],
                 ["run", "/nonexistent/plan.json", f"--timeout={text}"]):
        why = broken_promise(*run_in_process(argv))
        assert why is None, f"meshplan {' '.join(argv)}: {why}"


def test_a_failed_jobs_error_line_has_the_ranks_exceptions_not_their_tracebacks():
    from meshplan.exec.runtime.launch import _tail

    rank = ('Traceback (most recent call last):\n  File "/x/rank.py", line 47, in values\n'
            "    return np.ones(shape)\n           ^^^^^^^^^^^^^^\n"
            "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 1.00 TiB\n")
    line = _tail(rank * 4 + "Abort(1) on node 2: application called MPI_Abort\n")
    assert broken_promise(2, "", f"error: {line}\n") is None
    assert line == ("numpy._core._exceptions._ArrayMemoryError: Unable to allocate 1.00 TiB | Abort(1) on node 2: "
                    "application called MPI_Abort")
