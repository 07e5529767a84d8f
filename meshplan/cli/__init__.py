"""The ``meshplan`` command: ``meshplan <verb> [<object>] …`` (DESIGN.md, Thin CLI).

Verbs are listed once in :data:`VERBS` (name -> module of this package, one-line help).  A verb's
module defines ``register(subparsers)``, which adds the verb's parser and sets ``func`` to a function
``(args) -> int``.  Only the module of the verb being run is imported, so ``meshplan --help`` and
``meshplan VERB --help`` start fast (no z3, sympy, OR-Tools or matplotlib unless the verb needs them).  Errors
raised as :class:`~meshplan.errors.MeshplanError` print one line ``error: …``
on stderr and exit with the error's code (2 = bad input); ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import sys
from typing import NamedTuple, Sequence

from meshplan.models.core.errors import MeshplanError

__all__ = ["main", "build_parser", "ArgumentParser", "HelpFormatter", "VERBS", "Verb"]


class Verb(NamedTuple):
    """One ``meshplan`` verb: the module of :mod:`meshplan.cli` that registers it, and its help line."""

    module: str
    help: str


#: every verb, in the order ``meshplan --help`` lists them; add a new verb here (and nowhere else)
VERBS: dict[str, Verb] = {
    "solve": Verb("solve", "solve a planning question (placement)"),
    "check": Verb("check", "prove hand-written or exported reduction programs correct"),
    "run": Verb("run", "run reduction programs on MPI ranks, verify and time them"),
    "calibrate": Verb("calibrate", "measure link latency and bandwidth with MPI and fit a system file"),
    "export": Verb("export", "export a schedule as an mpi4py program or a JAX / PyTorch device mesh"),
    "show": Verb("show", "draw a placement and its reduction program as a PNG (--png)"),
    "redistribute": Verb("redistribute", "plan (and run) a memory-bounded array redistribution"),
    "bound": Verb("bound", "I/O lower bound and optimal tiles of a loop program (SOAP)"),
    "count": Verb("count", "loop iteration counts, work, depth and parallel efficiency (thesis ch. 2)"),
    "tensor": Verb("tensor", "halo planning and MPI checks of the DistDL tensor primitives and layers"),
    "matmul": Verb("matmul", "plan (and run) a distributed matrix multiplication (COSMA grids, SUMMA, ScaLAPACK)"),
    "factor": Verb("factor", "plan (and run) a distributed LU / Cholesky factorization (COnfLUX, COnfCHOX)"),
    "testbed": Verb("testbed", "an emulated multi-node machine on this host (namespaces, links shaped by tc)"),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help at the terminal's width (at most 100 columns): prose paragraphs of a description or epilog are
    wrapped; lines that start with spaces (examples, commands, lists) are kept as written."""

    def __init__(self, prog: str, **kw) -> None:
        import shutil

        kw.setdefault("width", min(shutil.get_terminal_size((80, 24)).columns, 100) - 2)
        super().__init__(prog, **kw)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for para in text.strip("\n").split("\n\n"):
            lines = para.split("\n")
            if any(ln.startswith((" ", "\t")) for ln in lines[1:]) or para.startswith((" ", "\t")):
                out.append("\n".join(indent + ln for ln in lines))  # an example block: verbatim
            else:
                out.append(textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out) + "\n"


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: … (see `meshplan … --help`)``, exit 2; a value that looks
    like a negative number or list (``--axes -2,-4``, ``--timeout -1e3``) reaches the flag's parser, which
    says what is wrong with it, instead of argparse's "expected one argument" (no meshplan option starts
    with a digit)."""

    def __init__(self, *args, **kwargs) -> None:
        if kwargs.get("formatter_class") in (None, argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter):
            kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d[\w.,+\-]*$")

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print ``error: MESSAGE (see `PROG --help`)`` on stderr and exit 2."""
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def build_parser(argv: Sequence[str] | None = None) -> ArgumentParser:
    """The ``meshplan`` parser.  With ``argv``, only the verb named in it is fully registered (the
    others get a help-only stub); without, every verb is (slower: imports every verb's module)."""
    parser = ArgumentParser(
        prog="meshplan",
        description="Plan and prove the communication of parallel programs on hierarchical machines.",
        epilog="Run `meshplan <command> --help` for the options of a command.",
    )
    from meshplan import __version__

    parser.add_argument("--version", action="version", version=f"meshplan {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    wanted = set(VERBS) if argv is None else {a for a in argv if a in VERBS}
    for name, verb in VERBS.items():
        if name in wanted:
            importlib.import_module(f"{__name__}.{verb.module}").register(sub)
        else:
            sub.add_parser(name, help=verb.help, add_help=False)
    return parser


def _interrupted() -> int:
    """Report Ctrl-C as one line and return 130.

    CPython keeps a process-wide "unhandled KeyboardInterrupt" flag: it is set when a ``KeyboardInterrupt``
    leaves any ``exec()`` of a string (``dataclasses`` builds every class's methods that way, so an interrupt
    during a lazy import sets it), and only the next ``exec()`` clears it.  At exit ``python -m`` then
    kills itself with SIGINT (exit status -2) although the interrupt was handled here.  An empty ``exec``
    clears the flag, so the process exits 130 as promised."""
    sys.stderr.write("error: interrupted\n")
    exec("")  # noqa: S102 - clears CPython's unhandled-KeyboardInterrupt flag; see above
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``meshplan ARGV`` and return the exit code: 0 success, 1 a negative verdict, 2 bad input (one
    ``error: …`` line on stderr), 70 an internal error, 130 interrupted; ``--debug`` shows tracebacks."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:  # Ctrl-C while the verb's modules load is one line too, not an import traceback
        parser = build_parser(argv)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return _interrupted()
    func = getattr(args, "func", None)
    if sys.stdout is None:  # started with stdout closed (`>&-`): the answer would go nowhere
        sys.stderr.write("error: standard output is closed; redirect it to a file or /dev/null\n")
        return 2
    if func is None:
        if args.command is None:
            sys.stderr.write(f"error: no command; choose one of {', '.join(VERBS)} (see `meshplan --help`)\n")
        else:
            parser.print_help(sys.stdout)
        return 2
    from meshplan.cli import common

    if getattr(args, "json_indent", None) is not None:
        args.json = True
    common.JSON_INDENT[0] = getattr(args, "json_indent", None)
    real = sys.stdout
    sys.stdout = _Stdout(real)
    try:
        with common.np_limit(args):  # --oversubscribe of the MPI verbs
            code = int(func(args) or 0)
        sys.stdout.flush()
        return code
    except _OutputFailed as out:
        return _output_failed(out.__cause__, real)
    except MeshplanError as err:
        if debug:
            raise
        sys.stderr.write(f"error: {_one_line(flag_message(err, parser, args))}\n")
        return err.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as err:  # noqa: BLE001 - never a traceback without --debug
        if debug:
            raise
        sys.stderr.write(f"error: internal error ({type(err).__name__}: {_one_line(str(err))}); "
                         "rerun with --debug and report it\n")
        return 70
    finally:
        sys.stdout = real
        common.JSON_INDENT[0] = None


class _OutputFailed(BaseException):
    """Writing to stdout failed (a BaseException, so no ``except Exception`` of a verb swallows it)."""


class _Stdout:
    """``sys.stdout`` while a verb runs: a failed write or flush (disk full, closed pipe) raises
    :class:`_OutputFailed` from the OSError, which :func:`main` reports."""

    def __init__(self, raw) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        try:
            return self._raw.write(text)
        except OSError as err:
            raise _OutputFailed from err

    def flush(self) -> None:
        try:
            self._raw.flush()
        except OSError as err:
            raise _OutputFailed from err

    def __getattr__(self, name):
        return getattr(self._raw, name)


def _output_failed(err: OSError, real) -> int:
    """A broken pipe (the reader stopped: ``meshplan … | head``) ends quietly with 141 as common tools do;
    any other failure to write the answer (a full disk, a closed descriptor) is one error line, exit 2.
    The process's stdout is pointed at /dev/null so that nothing fails again at exit."""
    import errno
    import os

    if real is sys.__stdout__:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, real.fileno())
            os.close(null)
    if isinstance(err, BrokenPipeError) or getattr(err, "errno", None) == errno.EPIPE:
        return 141
    sys.stderr.write(f"error: cannot write the output to standard output: {err.strerror or err}\n")
    return 2


#: API parameters whose CLI flag is not ``--`` + the parameter's name (the verb's dest)
PARAM_FLAGS = {"p": "--np", "programs": "--top-programs", "path": "--png", "baselines": "--baseline"}


def _flags(parser: argparse.ArgumentParser, args) -> dict[str, str]:
    """``dest -> flag`` of the verb (and object) that ran, from its parser: ``np -> --np``; positional
    arguments by their metavar (``src -> SRC``)."""
    out: dict[str, str] = {}
    todo, words = [parser], {v for v in vars(args).values() if isinstance(v, str)}
    while todo:
        p = todo.pop()
        for action in p._actions:  # noqa: SLF001 - argparse has no public accessor
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                todo += [sub for name, sub in action.choices.items() if name in words]
            elif action.option_strings:
                out.setdefault(action.dest, max(action.option_strings, key=len))
            elif action.dest not in ("help",):
                out.setdefault(action.dest, action.metavar if isinstance(action.metavar, str) else action.dest.upper())
    return out


def flag_message(err: MeshplanError, parser: argparse.ArgumentParser, args) -> str:
    """The error's message with the API parameters it names (``err.param``) written as the verb's flags, so a
    CLI user reads ``--np must be …`` where a Python user reads ``np must be …``."""
    text = str(err)
    names = err.param if isinstance(err.param, tuple) else (err.param,) if err.param else ()
    if not names:
        return text
    flags = _flags(parser, args)
    for name in names:
        flag = flags.get(name) or PARAM_FLAGS.get(name)
        if flag and flag != name:
            text = re.sub(rf"(?<![\w\-.'\"`]){re.escape(name)}(?![\w\-'\"`=])", flag, text)
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
