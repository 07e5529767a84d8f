"""Regenerate the sample outputs in docs/*.md, so they cannot drift from what the tool prints.

A sample is a fenced block whose first lines are commands (``$ meshplan …``, ``\\`` continues a line) followed by
the output of the last one (the earlier ones make its input files).  ``python docs/regen.py`` runs every page's commands in order in a scratch directory (with the
repository's ``examples/``), piped at ``COLUMNS=80`` as a reader's terminal would show them, and writes the
output back under the commands.  Commands that start MPI ranks (``run``, ``calibrate``, ``--run``, ``tensor
check``) print measured times, so their samples are regenerated only with ``--mpi``; those of the emulated
testbed (root, network namespaces) never.  ``--check`` changes nothing and exits 1 if a sample differs from what
the tool prints now, up to the figures that change from run to run (seconds, ``took``); tests/cli/
test_docs_examples.py runs it.

    python docs/regen.py            # rewrite the samples of commands that need no MPI
    python docs/regen.py --mpi      # also those that run on MPI ranks (timings change)
    python docs/regen.py --check    # exit 1 when a sample drifted
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"(```[\w-]*\n)(.*?)(```)", re.S)
#: figures that change from run to run: masked by --check
VOLATILE = re.compile(r"\d[\d.,]*\s*(s|ms|us|µs|ns)\b|took [\d.]+ s|\d+(\.\d+)? ?(GB|MB|KB)/s")


def _mpi(words: list[str]) -> bool:
    return words[:1] in (["run"], ["calibrate"]) or "--run" in words or words[:2] == ["tensor", "check"]


def _testbed(words: list[str]) -> bool:
    return words[:1] == ["testbed"] or "--testbed" in words


def _split(body: str) -> tuple[list[str], list[str], str] | None:
    """``(command lines as written, their joined commands, output)`` of a sample, or None if not one."""
    lines = body.split("\n")
    written, joined = [], []
    i = 0
    while i < len(lines) and lines[i].startswith("$ meshplan "):
        cmd = lines[i]
        written.append(lines[i])
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            written.append(lines[i])
            cmd = cmd[:-1] + " " + lines[i].strip()
        joined.append(cmd[2:])
        i += 1
    if not joined:
        return None
    return written, joined, "\n".join(lines[i:])


def _run(cmd: str, scratch: Path) -> str:
    words = shlex.split(cmd, comments=True)
    cut = next((k for k, w in enumerate(words) if w in {"&&", "||", "|", ">", ">>", ";"}), len(words))
    env = dict(os.environ, COLUMNS="80")
    proc = subprocess.run([sys.executable, "-m", *words[:cut]], cwd=scratch, env=env, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"regen: `{cmd}` failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return proc.stdout


def regenerate(page: Path, *, mpi: bool, outputs: list | None = None) -> tuple[str, list[str]]:
    """The page's new text and the commands whose samples were regenerated; ``outputs`` (a list), when given,
    receives ``(words, stdout)`` of every command run."""
    text = page.read_text()
    scratch = Path(tempfile.mkdtemp(prefix="meshplan-docs-"))
    (scratch / "examples").symlink_to(ROOT / "examples")
    (scratch / "docs" / "images").mkdir(parents=True)
    done: list[str] = []
    skipped_outputs: set[str] = set()

    def block(m: re.Match) -> str:
        parts = _split(m.group(2))
        if parts is None:
            return m.group(0)
        written, joined, output = parts
        words = [shlex.split(c, comments=True)[1:] for c in joined]
        if any(_testbed(w) or (_mpi(w) and not mpi) or skipped_outputs & set(w) for w in words):
            for w in words:
                skipped_outputs.update(w[k + 1] for k, a in enumerate(w[:-1]) if a in ("-o", "--export"))
            return m.group(0)
        printed = [_run(c, scratch) for c in joined]
        if outputs is not None:
            outputs.extend(zip(words, printed))
        new = printed[-1]  # the earlier commands make its input files
        if not output.strip() or "…" in output or re.search(r"^\$ ", output, re.M):
            return m.group(0)  # no output shown, an excerpt, or a session with other commands: kept as written
        done.extend(joined)
        return m.group(1) + "\n".join(written) + "\n" + new + m.group(3)

    try:
        return FENCE.sub(block, text), done
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the sample outputs of docs/*.md.")
    ap.add_argument("--mpi", action="store_true", help="also the samples of commands that start MPI ranks")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a sample drifted")
    ap.add_argument("pages", nargs="*", help="pages to regenerate (default: every docs/*.md)")
    args = ap.parse_args(argv)
    pages = [Path(p) for p in args.pages] or sorted((ROOT / "docs").glob("*.md"))
    drifted = []
    for page in pages:
        new, done = regenerate(page, mpi=args.mpi)
        old = page.read_text()
        if args.check:
            if VOLATILE.sub("#", new) != VOLATILE.sub("#", old):
                drifted.append(page.name)
        elif new != old:
            page.write_text(new)
            print(f"{page.name}: {len(done)} sample(s) regenerated")
    if drifted:
        print(f"samples differ from the tool's output in: {', '.join(drifted)}; run python docs/regen.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
