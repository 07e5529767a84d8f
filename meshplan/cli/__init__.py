"""The ``meshplan`` command: ``meshplan <verb> [<object>] …`` (DESIGN.md, Thin CLI).

Every module of this package that defines ``register(subparsers)`` adds its
verb; the verb's parser sets ``func`` to a function ``(args) -> int``.  Errors
raised as :class:`~meshplan.errors.MeshplanError` print one line ``error: …``
on stderr and exit with the error's code (2 = bad input); ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Sequence

from meshplan.models.errors import MeshplanError

__all__ = ["main", "build_parser", "ArgumentParser"]


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: … (see `meshplan … --help`)``, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="meshplan",
        description="Plan and prove the communication of parallel programs on hierarchical machines.",
        epilog="Run `meshplan <command> --help` for the options of a command.",
    )
    from meshplan import __version__

    parser.add_argument("--version", action="version", version=f"meshplan {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "common":
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr if args.command is None else sys.stdout)
        return 2
    try:
        return int(func(args) or 0)
    except MeshplanError as err:
        if debug:
            raise
        sys.stderr.write(f"error: {_one_line(str(err))}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # noqa: BLE001 - never a traceback without --debug
        if debug:
            raise
        sys.stderr.write(f"error: internal error ({type(err).__name__}: {_one_line(str(err))}); "
                         "rerun with --debug and report it\n")
        return 70


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
