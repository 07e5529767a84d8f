"""A loop program to count: its functions as control-flow models, the process-count parameter and the bounds
of unknown loop counts (thesis chapter 2).

:class:`CountProblem` is built once, by :meth:`CountProblem.of`, from a file path, Python source text or parsed
``Flow`` values; parsing is the validation (a :class:`~meshplan.models.core.errors.ParseError` names the line).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, value
from meshplan.models.loops.control import Flow

__all__ = ["CountProblem"]


@value
class CountProblem(Value):
    """The functions to count (``flows``), the name of the process-count parameter (``procs``) and bounds of
    unknown loop counts ``u_k`` (``"u1=0..100"`` text or a mapping name → (lower, upper))."""

    flows: tuple[Flow, ...]
    procs: str = "p"
    bounds: Any = None

    def __post_init__(self) -> None:
        if not self.flows or not all(isinstance(f, Flow) for f in self.flows):
            raise ModelError("a count problem needs at least one parsed function (Flow)", param="program")
        if not isinstance(self.procs, str) or not self.procs.isidentifier():
            raise ModelError(f"procs must be a parameter name such as p, got {self.procs!r}", param="procs")
        if self.bounds is not None and not isinstance(self.bounds, (str, Mapping)):
            raise ModelError(f"bounds must be text like u1=0..100 or a mapping, got {type(self.bounds).__name__}",
                             param="bounds")

    def to_json(self) -> dict[str, Any]:
        return {"functions": [f.name for f in self.flows], "procs": self.procs,
                "bounds": self.bounds if isinstance(self.bounds, (str, type(None))) else
                {k: [str(v) for v in b] for k, b in self.bounds.items()}}

    @classmethod
    def of(cls, program: Any, *, function: str | None = None, procs: str = "p", rank: str | None = None,
           bounds: Any = None) -> "CountProblem":
        """The problem of a ``.py`` path, Python source text or a ``Flow`` (``function``: only that one)."""
        from meshplan.models.loops.flow_frontend import parse_flow_file, parse_flow_source

        if isinstance(program, Flow):
            flows = [program]
        elif isinstance(program, os.PathLike) or (isinstance(program, str) and "\n" not in program and (
                os.path.exists(program) or program.endswith(".py"))):  # a missing .py path: "not found"
            flows = parse_flow_file(os.fspath(program), function=function, procs=procs, rank=rank)
        elif isinstance(program, str):
            flows = parse_flow_source(program, function=function, procs=procs, rank=rank)
        else:
            raise ModelError("program must be a file path, Python source or a Flow", param="program")
        return cls(tuple(flows), procs, bounds)
