"""The one error hierarchy of meshplan (DESIGN.md, "Errors").

It lives in the lowest layer so every layer can raise it; the front door
re-exports it as ``meshplan.errors``.  Every message says what was wrong and,
where possible, what to try next.  The CLI maps ``MeshplanError`` to a one-line
``error: …`` and the exit code in :attr:`MeshplanError.exit_code`.
"""

from __future__ import annotations

__all__ = [
    "quote",
    "MeshplanError",
    "ModelError",
    "ParseError",
    "Infeasible",
    "SolverTimeout",
    "VerificationError",
]


class MeshplanError(Exception):
    """Base class of every error meshplan raises on purpose.

    ``param`` names the API parameter(s) the message is about (a name or a tuple of names, as they appear
    in the message); the CLI shows each as the flag that sets it (``np`` → ``--np``)."""

    #: exit code of the CLI when this error ends a command (2 = bad input)
    exit_code: int = 2

    def __init__(self, *args: object, param: str | tuple[str, ...] | None = None) -> None:
        super().__init__(*args)
        self.param = param


class ModelError(MeshplanError, ValueError):
    """A domain value is ill-formed (bad sizes, unknown level, bad premise…)."""


class ParseError(ModelError):
    """Text could not be parsed; carries the 1-based line and column."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 source: str | None = None) -> None:
        self.line = line
        self.column = column
        self.source = source
        self.bare_message = message
        where = ""
        if source is not None:
            where += f"{source}:"
        if line is not None:
            where += f"{line}:"
            if column is not None:
                where += f"{column}:"
        super().__init__(f"{where} {message}".strip() if where else message)


class Infeasible(MeshplanError):
    """The question has no answer (e.g. no parallelism matrix exists)."""


class SolverTimeout(MeshplanError):
    """A solver or search hit its time limit before it could answer."""

    exit_code = 3


class VerificationError(MeshplanError):
    """A plan failed its independent re-check or its run on real data."""

    exit_code = 1


def quote(value: object, width: int = 60) -> str:
    """``repr(value)`` cut to about ``width`` characters: how a message quotes a user's input, which may be
    megabytes long (a 5,000-level system string, a 20,000-axis list)."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 12]}…{text[-8:]} ({len(text):,} characters)"
