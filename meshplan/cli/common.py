"""Pieces every CLI verb shares: the shared flags, JSON output, rich tables, progress.

One concept, one flag (docs/formats.md, "Flags shared by every command"): ``--json``, ``--repeats``
(``--repeat`` is a hidden deprecated alias), ``--np``, ``--dtype``, ``--solver`` (choices from the backend
registry), ``--placement``/``--program`` (indices into a schedule: 0 = the fastest; comma-separated
lists where a verb takes several programs).  Verb modules import heavy modules only when run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Mapping
from typing import Any, Sequence

from meshplan.models.core.errors import ModelError

__all__ = ["add_common_flags", "add_repeats_flag", "add_np_flag", "np_limit", "add_dtype_flag", "add_solver_flag",
           "print_run_report", "parse_baselines", "add_baseline_flag",
           "add_selection_flags", "solver_names", "print_json", "console", "status", "progress",
           "parse_int_list", "parse_matrix", "choose_placement", "seconds"]


def add_common_flags(parser, *, json_help: str = "print machine-readable JSON on stdout (see docs/)") -> None:
    """``--json``, ``--json-indent N`` (implies ``--json``) and ``--debug`` on a verb's parser."""
    parser.add_argument("--json", action="store_true", help=json_help + "; one line unless --json-indent")
    parser.add_argument("--json-indent", type=_indent, default=None, metavar="N",
                        help="indent the JSON by N spaces for reading (implies --json)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")


class _DeprecatedAlias(argparse.Action):
    """Store the value under the new flag's ``dest`` and say on stderr which flag to use instead."""

    def __init__(self, option_strings, dest, *, new: str, **kw) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        sys.stderr.write(f"warning: {option_string} is deprecated; use {self.new}\n")
        setattr(namespace, self.dest, values)


def add_repeats_flag(parser, *, default: int, help: str = "timed runs per program",
                     aliases: Sequence[str] = ("--repeat",)) -> None:
    """``--repeats R`` (``args.repeats``): timed repetitions; ``aliases`` (default ``--repeat``) are
    hidden deprecated spellings.  The value is checked where every ``repeats`` is, by
    :func:`meshplan.models.core.checks.check_repeats` in the library."""
    parser.add_argument("--repeats", type=int, default=default, metavar="R", help=f"{help} (default {default})")
    for alias in aliases:
        parser.add_argument(alias, type=int, dest="repeats", action=_DeprecatedAlias, new="--repeats",
                            help=argparse.SUPPRESS)


def seconds(text: str) -> float:
    """The argparse ``type`` of time limits (``--timeout``, ``--time-limit``): a positive finite number of
    seconds, at most a week (:func:`meshplan.api.inputs.as_seconds`)."""
    from meshplan.api.inputs import as_seconds

    try:
        return as_seconds(text, "the time limit")
    except ModelError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_np_flag(parser, *, required: bool = False, help: str = "MPI ranks") -> None:
    """``--np N`` (``args.np``): the number of MPI ranks (one per device of the system or mesh), and
    ``--oversubscribe`` (``args.oversubscribe``), which lifts the rank limit of docs/runtime.md for the
    verb's jobs (:func:`np_limit`)."""
    parser.add_argument("--np", type=int, default=None, required=required, metavar="N", help=help)
    parser.add_argument("--oversubscribe", action="store_true",
                        help="allow more MPI ranks than the limit (4 per core, or $MESHPLAN_MAX_RANKS; "
                             "docs/runtime.md): the ranks will share cores")


def np_limit(args):
    """The context a verb runs in: with ``--oversubscribe``, the runtime's rank limit is lifted
    (:func:`meshplan.exec.runtime.launch.oversubscribe`); otherwise nothing changes."""
    if not getattr(args, "oversubscribe", False):
        return contextlib.nullcontext()
    from meshplan.exec.runtime.launch import oversubscribe

    return oversubscribe()


def add_dtype_flag(parser, *, choices: Sequence[str], default: str, help: str = "element type") -> None:
    """``--dtype T`` (``args.dtype``): the element type of the arrays a verb moves.  ``choices`` (short or numpy
    names) are listed in the help; the value is checked where every ``dtype`` is, by
    :func:`meshplan.models.core.dtypes.as_dtype` in the library, which accepts both spellings (``i64`` or
    ``int64``)."""
    listed = ",".join(choices)
    parser.add_argument("--dtype", default=default, metavar="{" + listed + "}",
                        help=f"{help} (default {default}; numpy or short spellings, e.g. int64 or i64)")


def solver_names() -> tuple[str, ...]:
    """The solver backends' names, in the registry's order (:mod:`meshplan.solvers.backends.base`)."""
    from meshplan.solvers.backends import base

    for attr in ("BACKENDS", "BACKEND_NAMES", "REGISTRY"):
        value = getattr(base, attr, None)
        if value:
            items = value.keys() if isinstance(value, dict) else value
            return tuple(x if isinstance(x, str) else x.name for x in items)
    return ("cpsat", "z3")  # pragma: no cover - the registry always lists its backends


def add_solver_flag(parser, *, default: str, help: str = "solver backend") -> None:
    """``--solver NAME`` (``args.solver``), choices from the backend registry."""
    parser.add_argument("--solver", choices=solver_names(), default=default, help=f"{help} (default {default})")


def add_selection_flags(parser, *, several: bool) -> None:
    """``--placement`` and ``--program``: indices into a schedule (0 = the fastest placement, and the fastest
    simulated program inside it).  With ``several``, comma-separated lists (default: all); otherwise one
    index each (default 0)."""
    if several:
        parser.add_argument("--placement", default=None, metavar="P[,P…]",
                            help="placement indices of the schedule (default: all; 0 = fastest)")
        parser.add_argument("--program", default=None, metavar="K[,K…]",
                            help="program indices inside each selected placement (default: all; 0 = fastest "
                                 "simulated)")
    else:
        parser.add_argument("--placement", default="0", metavar="P",
                            help="placement index of the schedule (default 0, the fastest)")
        parser.add_argument("--program", default="0", metavar="K",
                            help="program index inside the placement (default 0, the fastest simulated)")


def _indent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 16:
        raise argparse.ArgumentTypeError(f"must be a whole number of spaces from 0 to 16, got {text!r}")
    return value


#: the verb's ``--json-indent`` (set by :func:`meshplan.cli.main` for the verb it runs)
JSON_INDENT: list[int | None] = [None]


def print_json(obj: Any) -> None:
    """JSON on stdout: one line by default (a script reads it; the C encoder), indented with ``--json-indent``."""
    indent = JSON_INDENT[0]
    text = json.dumps(obj, default=_default) if indent is None else json.dumps(obj, indent=indent, default=_default)
    sys.stdout.write(text + "\n")


def _default(o: Any) -> Any:
    if hasattr(o, "to_json"):
        return o.to_json()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Mapping):
        return dict(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def console():
    """A rich console on stdout that prints user text literally (:func:`meshplan.cli.render.make_console`): the
    terminal's width, or ``$COLUMNS`` (default 80) when piped, then without trailing spaces."""
    import os

    from meshplan.cli.render import make_console

    con = make_console()
    if not con.is_terminal:  # pipes and files: 80 columns unless COLUMNS says otherwise
        cols = os.environ.get("COLUMNS", "")
        con = make_console(width=int(cols) if cols.isdigit() and int(cols) >= 40 else 80)
    return con


def status(show: bool, text: str):
    """A spinner on stderr while long work runs, only on a terminal (DESIGN.md: long work shows progress)."""
    if not (show and sys.stderr.isatty()):
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(text)


@contextlib.contextmanager
def progress(show: bool, label: str, unit: str = ""):
    """A transient progress bar with counts (``unit 3/12``) on stderr, only when ``show`` (not ``--json``)
    and stderr is a terminal; yields ``update(done, total, what="")`` (or ``None`` when hidden), ``what``
    naming the item under way."""
    if not (show and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(unit), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.fields[what]}"),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=None, what="")
    bar.start()

    def update(done: int, total: int, what: str = "") -> None:
        bar.update(task, completed=done, total=total, what=what)

    try:
        yield update
    finally:
        bar.stop()


def parse_int_list(text: str, what: str) -> tuple[int, ...]:
    """``"4,16" -> (4, 16)`` with a message naming the flag on bad input."""
    from meshplan.api.inputs import as_int_tuple

    return as_int_tuple(str(text), what)


def parse_matrix(text: str) -> list[list[int]]:
    """``--matrix '[[2,2],[2,8]]'`` as rows of integers, with a message naming the flag."""
    from meshplan.api.inputs import as_matrix_rows

    return as_matrix_rows(text)


def choose_placement(system, axes, matrix_text: str | None):
    """The placement of ``--matrix``, or the only one there is; otherwise an error listing them."""
    from meshplan.api.inputs import choose_placement as choose

    return choose(system, axes, matrix_text)



def print_run_report(args, rep: dict, printer) -> int:
    """Print a plan/run report (``--json`` or the verb's table ``printer``) and return the exit code of
    the verbs that plan and optionally ``--run`` (matmul, factor): 1 when the run or a baseline that ran
    failed verification, else 0."""
    if args.json:
        print_json(rep)
    else:
        printer(rep)
    if getattr(args, "run", False) and not (
            rep["run"]["verified"] and all(b.get("verified", True) is not False for b in rep["baselines"].values())):
        return 1
    return 0


def add_baseline_flag(parser, *, names: Sequence[str], default: str, help: str) -> None:
    """``--baseline [NAMES]`` (``args.baseline``): the baselines to put next to meshplan's plan, comma-separated
    from ``names`` (``none`` for none); the flag alone means all of them.  One form in every verb that has
    baselines (``redistribute``, ``matmul``, ``factor``); the names are checked where the baselines run."""
    parser.add_argument("--baseline", nargs="?", const=",".join(names), default=default, metavar="NAMES",
                        help=f"{help}: comma-separated from {','.join(names)}, or none; the flag alone: all "
                             f"(default {default})")


def parse_baselines(text: str) -> list[str]:
    """The names of ``--baseline a,b`` (``none``: none); the library checks each name.  An empty value or an
    empty name (``--baseline ""``, ``a,,b``) is refused: "none" is said in words."""
    if text.strip() == "none":
        return []
    names = [b.strip() for b in text.split(",")]
    if not any(names) or not all(names):
        raise ModelError(f"baselines {text!r} names no baseline where one is expected; give comma-separated "
                         "names, or none for no baseline", param="baselines")
    return names
