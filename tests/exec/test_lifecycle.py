"""Lifecycle of MPI jobs (docs/runtime.md): a failing or hanging rank ends the whole job with one error, and
SIGINT/SIGTERM sent to a running launcher — the runtime's ``run_job`` and the verbs ``meshplan run``,
``meshplan redistribute --run``, ``meshplan calibrate``, ``meshplan matmul --run``, ``meshplan factor --run``
and ``meshplan tensor check`` — leave no process of the job and no file behind; SIGKILL of the CLI (``run``,
``matmul --run``, ``factor --run``, ``tensor check``) leaves no process after 10 s and a job directory the next
launch removes; the rank limit is lifted by ``--oversubscribe`` only.

Each interrupted case costs a few seconds (CLI start, ``mpiexec``, the grace period), so every verb family
keeps one signal in the fast subset and the other under ``@pytest.mark.slow``.

Every process of a job is found by a marker variable in its environment (mpiexec passes the launcher's
environment to hydra's proxies and the ranks); leftover files by pointing ``TMPDIR`` at an empty folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import MpiRunError, run_job

pytestmark = pytest.mark.mpi


def _marked(marker: str) -> list[int]:
    """Processes whose environment holds ``marker`` (mpiexec, hydra's proxies, the ranks)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def _ranks(marker: str, module: str) -> list[int]:
    out = []
    for p in _marked(marker):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if module.encode() in cmd and b"mpiexec" not in cmd:
            out.append(p)
    return out


def _wait_gone(marker: str, seconds: float = 20.0) -> list[int]:
    end = time.monotonic() + seconds
    while (alive := _marked(marker)) and time.monotonic() < end:
        time.sleep(0.2)
    return alive


@pytest.mark.parametrize("kind,msg", [("raise", "injected failure"), ("hang", "timed out"),
                                      ("mute", "rank 2: RuntimeError: injected failure")])
def test_fault_hook_ends_the_whole_job_with_one_error(kind, msg, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    marker = f"MESHPLAN_TEST_{uuid.uuid4().hex}"
    with pytest.raises(MpiRunError, match=msg):
        run_job(4, "meshplan.exec.runtime.selftest", {"fault": {"rank": 2, "kind": kind}},
                timeout_s=60 if kind == "raise" else 10, env={marker: "1"})
    assert _wait_gone(marker) == []
    assert list(tmp_path.iterdir()) == []


def _interrupt(argv: list[str], module: str, nranks: int, sig: int, tmp_path: Path) -> tuple[int, str]:
    """Start ``argv``, wait until its ``nranks`` ranks of ``module`` run, send ``sig``; return the exit
    code and stderr after asserting that no process of the job survives and no file is left."""
    marker = f"MESHPLAN_TEST_{uuid.uuid4().hex}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), **{marker: "1"})
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 240
        while time.monotonic() < end and proc.poll() is None and len(_ranks(marker, module)) < nranks:
            time.sleep(0.3)
        assert proc.poll() is None, f"the job ended before it was interrupted: {proc.stderr.read()}"
        assert len(_ranks(marker, module)) >= nranks
        time.sleep(0.5)  # the ranks are inside the job
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _wait_gone(marker) == [], "a process of the interrupted job survived"
    assert list(tmp.iterdir()) == [], "the interrupted job left files behind"
    return proc.returncode, err


SIGNALS = [signal.SIGINT, signal.SIGTERM]


def _expect_exit(sig: int, code: int, err: str, cli: bool) -> None:
    if sig == signal.SIGINT:  # Ctrl-C: KeyboardInterrupt, which the CLI reports as one line, exit 130
        assert (code, err.strip().splitlines()[-1]) == (130, "error: interrupted") if cli else code != 0
    else:  # SIGTERM ends the process as its default action does
        assert code == -signal.SIGTERM


@pytest.mark.parametrize("sig", SIGNALS, ids=["INT", "TERM"])
def test_run_job_interrupted(sig, tmp_path):
    code = ("from meshplan.exec.runtime.launch import run_job\n"
            "run_job(4, 'meshplan.exec.runtime.selftest', {'sleep_s': 600}, timeout_s=900)\n")
    rc, err = _interrupt([sys.executable, "-c", code], "meshplan.exec.runtime.selftest", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=False)
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err


def _meshplan() -> str:
    exe = Path(sys.executable).parent / "meshplan"
    return str(exe) if exe.exists() else shutil.which("meshplan")


@pytest.fixture(scope="module")
def schedule(tmp_path_factory):
    from meshplan.cli import main

    path = tmp_path_factory.mktemp("interrupt") / "plan.json"
    assert main(["solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "1",
                 "--max-size", "2", "--export", str(path), "--json"]) == 0
    return path


@pytest.mark.parametrize("sig", SIGNALS, ids=["INT", "TERM"])
def test_meshplan_run_interrupted(sig, schedule, tmp_path, capsys):
    capsys.readouterr()
    argv = [_meshplan(), "run", str(schedule), "--repeats", "10000", "--bytes", "64KiB", "--json"]
    rc, err = _interrupt(argv, "meshplan.exec.reduction.rank_main", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)


@pytest.mark.parametrize("sig", SIGNALS, ids=["INT", "TERM"])
def test_meshplan_redistribute_run_interrupted(sig, tmp_path):
    argv = [_meshplan(), "redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4", "--run",
            "--repeats", "10000", "--json"]
    rc, err = _interrupt(argv, "meshplan.exec.redistribution.rank_main", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)


@pytest.mark.parametrize("sig", SIGNALS, ids=["INT", "TERM"])
def test_meshplan_calibrate_interrupted(sig, tmp_path):
    argv = [_meshplan(), "calibrate", "--np", "4", "--repeats", "10000", "--bytes", "64KiB",
            "-o", str(tmp_path / "cal.json")]
    rc, err = _interrupt(argv, "meshplan.exec.reduction.calibrate", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)
    assert not (tmp_path / "cal.json").exists()


def _slow_for(fast: int):
    """Both signals; the one that is not ``fast`` is marked slow (one fast case per verb family)."""
    return [pytest.param(sig, id=sig.name[3:], marks=() if sig == fast else pytest.mark.slow) for sig in SIGNALS]


@pytest.mark.parametrize("sig", _slow_for(signal.SIGINT))
def test_meshplan_matmul_run_interrupted(sig, tmp_path):
    # with the PMPI byte counter preloaded (its per-rank files go to a temporary directory of the job)
    argv = [_meshplan(), "matmul", "192", "192", "192", "--np", "4", "--run", "--repeats", "10000",
            "--baseline", "none", "--json"]
    rc, err = _interrupt(argv, "meshplan.exec.matmul.rank", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)


@pytest.mark.parametrize("sig", _slow_for(signal.SIGTERM))
def test_meshplan_factor_run_interrupted(sig, tmp_path):
    argv = [_meshplan(), "factor", "lu", "64", "--np", "4", "--run", "--repeats", "10000", "--baseline", "none",
            "--no-pmpi", "--json"]
    rc, err = _interrupt(argv, "meshplan.exec.factorization.rank_main", 4, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)


@pytest.mark.parametrize("sig", _slow_for(signal.SIGINT))
def test_meshplan_tensor_check_interrupted(sig, tmp_path):
    # on 8 ranks: the whole suite takes ~1 s on 4 idle ranks, too short to be interrupted reliably
    argv = [_meshplan(), "tensor", "check", "--np", "8", "--json"]
    rc, err = _interrupt(argv, "meshplan.exec.tensor.rank_main", 8, sig, tmp_path)
    _expect_exit(sig, rc, err, cli=True)


KILLED = [
    pytest.param(["run", "{schedule}", "--repeats", "10000", "--bytes", "64KiB", "--json"],
                 "meshplan.exec.reduction.rank_main", 4, id="run"),
    pytest.param(["matmul", "192", "192", "192", "--np", "4", "--run", "--repeats", "10000", "--baseline", "none",
                  "--json"], "meshplan.exec.matmul.rank", 4, id="matmul"),
    pytest.param(["factor", "lu", "64", "--np", "4", "--run", "--repeats", "10000", "--baseline", "none", "--json"],
                 "meshplan.exec.factorization.rank_main", 4, id="factor"),
    pytest.param(["tensor", "check", "--np", "8", "--json"], "meshplan.exec.tensor.rank_main", 8, id="tensor"),
]


@pytest.mark.parametrize("argv,module,nranks", KILLED)
def test_sigkill_of_the_cli_leaves_no_process(argv, module, nranks, schedule, tmp_path):
    """SIGKILL reaches no handler: mpiexec dies by its parent-death signal, every rank by its watchdog, within
    10 s; the job directory left behind is removed by the next launch."""
    from meshplan.exec.runtime.launch import remove_stale_jobs

    marker = f"MESHPLAN_TEST_{uuid.uuid4().hex}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), **{marker: "1"})
    argv = [_meshplan()] + [a.format(schedule=schedule) for a in argv]
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 240
        while time.monotonic() < end and proc.poll() is None and len(_ranks(marker, module)) < nranks:
            time.sleep(0.3)
        assert proc.poll() is None and len(_ranks(marker, module)) >= nranks, proc.stderr.read()
        time.sleep(0.5)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _wait_gone(marker, seconds=10.0) == [], "a process of the killed job survived 10 s"
    left = list(tmp.iterdir())
    assert left and all(p.name.startswith("meshplan-") for p in left)  # SIGKILL could not clean up ...
    assert sorted(remove_stale_jobs(str(tmp))) == sorted(str(p) for p in left)  # ... the next launch does
    assert list(tmp.iterdir()) == []


def test_remove_stale_jobs_leaves_live_and_foreign_directories(tmp_path):
    from meshplan.exec.runtime.guard import launcher_token
    from meshplan.exec.runtime.launch import remove_stale_jobs

    live, dead, foreign = (tmp_path / "meshplan-a-1", tmp_path / "meshplan-b-2", tmp_path / "meshplan-c-3")
    for d in (live, dead, foreign):
        d.mkdir()
    (live / "owner").write_text(launcher_token() + "\n")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = launcher_token(child.pid)
    child.wait()
    (dead / "owner").write_text(token + "\n")
    assert remove_stale_jobs(str(tmp_path)) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meshplan-a-1", "meshplan-c-3"]


def test_oversubscribe_lifts_the_rank_limit(schedule, tmp_path, monkeypatch, capsys):
    """``--np`` above ``MESHPLAN_MAX_RANKS`` is refused (exit 2, naming both ways out) unless
    ``--oversubscribe`` is given, which every MPI verb accepts; the limit applies again afterwards."""
    from meshplan.cli import main
    from meshplan.exec.runtime.launch import check_np

    monkeypatch.setenv("MESHPLAN_MAX_RANKS", "2")
    argv = ["run", str(schedule), "--repeats", "1", "--bytes", "1KiB", "--json"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --np 4 exceeds the limit of 2 MPI ranks on this machine (MESHPLAN_MAX_RANKS=2); "
                   "pass --oversubscribe or set MESHPLAN_MAX_RANKS=4 to run it anyway")
    assert main(argv + ["--oversubscribe"]) == 0
    assert '"verified": true' in capsys.readouterr().out
    with pytest.raises(Exception, match="exceeds the limit of 2"):
        check_np(4)  # the lift ended with the verb
    for verb in (["run", "x"], ["redistribute", "[4{x}16]", "[16]", "--mesh", "x=4"], ["calibrate"], ["matmul", "8", "8", "8"],
                 ["factor", "lu", "8"], ["tensor", "check"]):
        from meshplan.cli import build_parser

        args = build_parser(verb).parse_args(verb + ["--np", "4", "--oversubscribe"])
        assert args.oversubscribe is True and args.np == 4, verb
