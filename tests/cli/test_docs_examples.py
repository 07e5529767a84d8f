"""Every ``meshplan …`` command in the code blocks of docs/ and the README runs as printed, and reads well on an
80-column terminal: run with ``COLUMNS=80`` (stdout piped), no line of a table or text answer is wider than 80
characters, no number is cut short with ``…``, and no bracket of the output is lost.

Commands run in order, per page, in one scratch directory (a page's ``solve --export plan.json`` feeds its
``export plan.json``); ``examples/…`` paths are the repository's.  Synopsis lines (``FILE``, ``[--json]``,
``a|b``) are skipped; commands that start MPI ranks run in the ``mpi`` tests, those of the emulated testbed
(root and network namespaces) are parsed only.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SHELL = {"&&", "||", "|", ">", ">>", ";"}
#: an upper-case placeholder word of a synopsis (FILE, SCHEDULE.json, N, PRESET|FILE|STRING)
_PLACEHOLDER = re.compile(r"(^|[\s=,])[A-Z][A-Z_.]*(\.json|\.py|\.txt)?($|[\s,|])")


def _commands(page: Path) -> list[list[str]]:
    out = []
    for body in re.findall(r"```[\w-]*\n(.*?)```", page.read_text(), re.S):
        joined: list[str] = []
        for ln in body.split("\n"):
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + ln.strip()
            else:
                joined.append(ln.strip())
        session = any(ln.startswith("$ ") for ln in joined)  # a sample: commands are the "$ " lines
        for ln in joined:
            if session and not ln.startswith("$ "):
                continue
            ln = ln[2:] if ln.startswith("$ ") else ln
            if not ln.startswith("meshplan ") or "[--" in ln or _PLACEHOLDER.search(ln[9:]):
                continue
            words = shlex.split(ln, comments=True)[1:]
            if any("|" in w and not w.startswith("[") for w in words):
                continue
            cut = next((i for i, w in enumerate(words) if w in SHELL), len(words))
            out.append(words[:cut])
    return out


COMMANDS = {page.name: _commands(page) for page in PAGES}
ALL = [(name, tuple(c)) for name, cmds in COMMANDS.items() for c in cmds]


def _testbed(argv) -> bool:
    return argv[0] == "testbed" or "--testbed" in argv


def _mpi(argv) -> bool:
    return argv[0] in ("run", "calibrate") or "--run" in argv or tuple(argv[:2]) == ("tensor", "check")


def test_the_docs_have_commands():
    assert len(ALL) >= 20
    assert {a[0] for _, a in ALL} >= {"solve", "check", "run", "export", "show", "redistribute", "tensor", "matmul",
                                      "factor", "bound", "count"} - {"bound", "count"}


@pytest.mark.parametrize("page,argv", ALL, ids=[f"{p}:{' '.join(a)[:60]}" for p, a in ALL])
def test_docs_command_parses(page, argv):
    args = build_parser(list(argv)).parse_args(list(argv))
    assert callable(getattr(args, "func", None))


def _check_80_columns(argv, out: str) -> None:
    """Tables and text answers fit 80 columns (JSON is one line; ``export`` prints a program, not a table)."""
    lines = out.splitlines()
    if "--json" not in argv and argv[0] != "export":
        wide = [ln for ln in lines if len(ln) > 80]
        assert not wide, f"lines over 80 columns: {wide[:3]}"
    trailing = [ln for ln in lines if ln != ln.rstrip(" ")]
    assert not trailing, f"trailing spaces: {trailing[:3]!r}"
    cut = re.findall(r"\d[\d,.]*…|…[\d,.]*\d", out)
    assert not cut, f"numbers cut short: {cut[:3]}"


def _regen():
    """docs/regen.py as a module (it is a script of the docs, not of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("meshplan_docs_regen", ROOT / "docs" / "regen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_page(page: str, scratch: Path, which) -> None:
    (scratch / "docs" / "images").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="80")
    unmade: set[str] = set()  # files only a skipped command would write
    for argv in COMMANDS[page]:
        if _testbed(argv) or not which(argv) or unmade & set(argv):
            unmade |= {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--export")}
            continue
        argv = [str(ROOT / a) if a.startswith("examples/") else a for a in argv]
        proc = subprocess.run([sys.executable, "-m", "meshplan", *argv], cwd=scratch, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode in (0, 1), f"meshplan {' '.join(argv)}: exit {proc.returncode}: {proc.stderr[-600:]}"
        assert proc.stdout.strip() or any(scratch.iterdir())
        _check_80_columns(argv, proc.stdout)


PLAIN_PAGES = [p for p, cmds in COMMANDS.items() if any(not _mpi(c) and not _testbed(c) for c in cmds)]
MPI_PAGES = [p for p, cmds in COMMANDS.items() if any(_mpi(c) and not _testbed(c) for c in cmds)]


@pytest.mark.parametrize("page", PLAIN_PAGES)
def test_docs_commands_run_at_80_columns(page, tmp_path):
    """The commands that need no MPI run as printed, fit 80 columns, and their sample outputs are what the tool
    prints (docs/regen.py --check for this page: up to run-to-run figures; regenerate with
    ``python docs/regen.py``)."""
    regen = _regen()
    path = ROOT / "docs" / page if (ROOT / "docs" / page).exists() else ROOT / page
    outputs: list = []
    new, _ = regen.regenerate(path, mpi=False, outputs=outputs)
    for words, out in outputs:
        _check_80_columns(words, out)
    assert regen.VOLATILE.sub("#", new) == regen.VOLATILE.sub("#", path.read_text()), \
        f"a sample of {page} differs from what the tool prints; run python docs/regen.py {path.relative_to(ROOT)}"
    _run_page(page, tmp_path, lambda a: not _mpi(a) and not any(" ".join(a) in " ".join(w) for w, _ in outputs))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("page", MPI_PAGES)
def test_docs_mpi_commands_run_at_80_columns(page, tmp_path):
    _run_page(page, tmp_path, lambda a: True)


def test_brackets_in_user_text_are_printed(tmp_path):
    """rich markup in user text: a file named ``[red]m.py`` and a loop bound ``rowstr[j]`` print as written."""
    from meshplan.cli.render import make_console

    import io

    buf = io.StringIO()
    con = make_console(width=80, file=buf)
    con.print("[bold]file[/bold] probe/[red]m.py: for k in range(rowstr[j], rowstr[j+1])   ")
    assert buf.getvalue() == "file probe/[red]m.py: for k in range(rowstr[j], rowstr[j+1])\n"


def _python_blocks() -> list[tuple[str, int, str]]:
    """``(page, ranks or 0, code)`` of the whole programs among the ```python blocks of docs/ (api.md's and the
    blocks using ``MPI.COMM_WORLD`` run in tests/test_api.py and tests/exec/test_examples_mpi.py; excerpts with
    ``…`` or ``...`` are not programs)."""
    out = []
    for page in PAGES:
        if page.name == "api.md":
            continue
        for m in re.finditer(r"```python\n(.*?)```", page.read_text(), re.S):
            code = m.group(1)
            ranks = re.match(r"# run with: mpiexec -n (\d+)", code)
            if ranks is None and ("MPI.COMM_WORLD" in code or not code.startswith(("import ", "from ", "def "))):
                continue
            if "…" in code or re.search(r"^\s*\.\.\.", code, re.M):
                continue
            out.append((page.name, int(ranks.group(1)) if ranks else 0, code))
    return out


PYTHON_BLOCKS = _python_blocks()


@pytest.mark.mpi
@pytest.mark.parametrize("page,ranks,code", [
    pytest.param(p, r, c, marks=[pytest.mark.slow] if re.search(r"^import (torch|jax)", c, re.M) else [])
    for p, r, c in PYTHON_BLOCKS], ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(PYTHON_BLOCKS)])
def test_docs_python_runs_as_printed(page, ranks, code, tmp_path):
    """Each whole program of the docs runs as printed: ``mpiexec -n K python it.py`` when it says so, else
    ``python it.py`` from the repository root (its ``examples/`` paths)."""
    from meshplan.exec.runtime.launch import run_mpi

    script = tmp_path / "block.py"
    script.write_text(code)
    if ranks:
        run_mpi(ranks, [str(script)], timeout_s=300, cwd=str(ROOT))
    else:
        proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-1500:]


def test_docs_python_blocks_are_found():
    assert {(p, r) for p, r, _ in PYTHON_BLOCKS} >= {("tensor.md", 4), ("run.md", 0), ("runtime.md", 0)}
