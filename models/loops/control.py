"""Structured loop programs with scalar iteration variables (thesis section 2.2).

The SOAP view of a loop program (:mod:`meshplan.models.loops.program`) keeps only ``range`` loops and
array statements.  Iteration counting (chapter 2) needs the control flow itself: initial assignments,
``while`` loops whose guard ``c^T x < g`` is affine in the iteration variables, updates ``x <- A x + b``
(additive and multiplicative, several variables updated together), ``if`` on parameters, and several
loops in one body (multipath loops, section 2.4.5).  A :class:`Flow` is that tree, read from the same
plain Python functions by :func:`meshplan.models.loops.frontend.parse_flow_source`.

Nodes:

* :class:`Assign` — ``targets <- values`` simultaneously (``x, y = y, x + y``; ``y *= 2``);
* :class:`Loop` — ``while guard: body`` where ``guard`` is a conjunction of slacks ``s_j(x) > 0``
  (``x < g`` has slack ``g - x``); a ``for v in range(lo, hi, step)`` is ``v = lo`` followed by a loop
  with guard ``hi - v > 0`` whose body ends with ``v += step``;
* :class:`Work` — one statement of unit work (section 2.1.1), counted;
* :class:`Branch` — ``if`` on parameters only;
* :class:`Opaque` — a loop outside the affine class (data-dependent bounds, ``break``…): it runs an
  unknown number ``u_k`` of times (section 2.5.1).

The frontend may hand a node's sympy field (``values``, ``guard``, ``cond``) over as a :class:`Deferred`: the
same value as quasi-affine forms (:func:`forms_of`), its sympy expression built on first access (a
statement's source ``text`` likewise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import sympy as sp

from meshplan.models.core.errors import ModelError

__all__ = ["Assign", "Loop", "Work", "Branch", "Opaque", "Flow", "Node", "Deferred", "assigned_vars", "walk_nodes",
           "forms_of", "lazy_fields", "raw_field"]


class Deferred:
    """A node's sympy field built on first use (``make()``), with the same value as quasi-affine forms
    (:mod:`meshplan.models.loops.forms`): the counting frontend reads affine bounds, steps and guards as forms,
    and only a consumer that needs sympy (the closed-form engine, execution, evaluation) builds it."""

    __slots__ = ("make", "forms", "_value")

    def __init__(self, make, forms) -> None:
        self.make, self.forms, self._value = make, forms, None

    def get(self):
        if self._value is None:
            self._value = self.make()
        return self._value


class _Lazy:
    """The field descriptor of a node's sympy field that may hold a :class:`Deferred` (its value is returned)."""

    __slots__ = ("slot",)

    def __init__(self, slot) -> None:
        self.slot = slot

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        v = self.slot.__get__(obj, owner)
        return v.get() if type(v) is Deferred else v

    def __set__(self, obj, v) -> None:
        self.slot.__set__(obj, v)

    def __delete__(self, obj) -> None:
        self.slot.__delete__(obj)


def lazy_fields(cls, *names: str):
    """Let the slot fields ``names`` of the frozen dataclass ``cls`` hold a :class:`Deferred` (read as its value)."""
    for name in names:
        setattr(cls, name, _Lazy(cls.__dict__[name]))
    return cls


def raw_field(obj, name: str):
    """The field ``name`` of ``obj`` as stored: a :class:`Deferred` is not built."""
    return type(obj).__dict__[name].slot.__get__(obj, type(obj))


_raw = raw_field


def forms_of(node, name: str):
    """The quasi-affine forms of ``node``'s sympy field ``name`` (``guard``, ``values``: a tuple of forms;
    ``cond``: a condition), or None when the node holds sympy only."""
    v = _raw(node, name)
    return v.forms if type(v) is Deferred else None


@dataclass(frozen=True, slots=True)
class Assign:
    """``targets <- values`` (all right-hand sides read the old values)."""

    targets: tuple[str, ...]
    values: tuple[sp.Expr, ...]
    line: int = 0

    def __post_init__(self) -> None:
        vals = _raw(self, "values")
        if len(self.targets) != len(vals.forms if type(vals) is Deferred else vals) or not self.targets:
            raise ModelError(f"line {self.line}: assignment needs as many values as targets")


@dataclass(frozen=True, slots=True)
class Loop:
    """``while all(s > 0 for s in guard): body``; ``var``/``kind`` only describe the source."""

    guard: tuple[sp.Expr, ...]
    body: tuple["Node", ...]
    line: int = 0
    kind: str = "while"
    var: str | None = None
    parallel: bool = False

    def __post_init__(self) -> None:
        g = _raw(self, "guard")
        if not (g.forms if type(g) is Deferred else g):
            raise ModelError(f"line {self.line}: a loop needs a guard")


@dataclass(frozen=True, slots=True)
class Work:
    """One unit-work statement (named ``S1``, ``S2``… or by a ``# count: NAME`` marker)."""

    name: str
    line: int = 0
    text: str = ""


@dataclass(frozen=True, slots=True)
class Branch:
    """``if cond: then else: orelse`` with ``cond`` a sympy relation on parameters only."""

    cond: sp.Basic
    then: tuple["Node", ...]
    orelse: tuple["Node", ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class Opaque:
    """A loop outside the class: ``symbol`` iterations of ``body`` (thesis section 2.5.1).

    ``cond``: for an ``if`` on iteration variables (an ``else`` is the negation), the condition as a sympy
    relation, so that a counter that takes conditions into the iteration domain (Barvinok's algorithm) can
    use it; None for loops and for conditions that read data."""

    symbol: str
    body: tuple["Node", ...]
    line: int = 0
    construct: str = ""
    assigned: tuple[str, ...] = ()
    cond: sp.Basic | None = None


Node = Union[Assign, Loop, Work, Branch, Opaque]

for _cls, _name in ((Assign, "values"), (Loop, "guard"), (Branch, "cond"), (Opaque, "cond"), (Work, "text")):
    lazy_fields(_cls, _name)


@dataclass(frozen=True, slots=True)
class Flow:
    """One function: its parameters, the rank variable (if any) and the body tree.

    ``grid``: for explicitly parallel code over a process grid (declared ``assert 0 <= r < p and 0 <= s < q``),
    the (rank variable, process count) pair of every grid dimension, in the order declared; ``rank`` is then
    the first dimension's rank variable.  Empty for code with one rank variable named by convention."""

    name: str
    params: tuple[str, ...]
    body: tuple[Node, ...]
    rank: str | None = None
    notes: tuple[str, ...] = field(default=())
    source: str | None = None
    grid: tuple[tuple[str, str], ...] = ()

    def ranks(self, procs: str = "p") -> tuple[tuple[str, str], ...]:
        """The (rank variable, process count) pairs of the process grid: ``grid`` when declared, else
        ``((rank, procs),)`` for one rank variable, else ``()`` (sequential code)."""
        if self.grid:
            return self.grid
        return ((self.rank, procs),) if self.rank else ()

    @property
    def statements(self) -> tuple[Work, ...]:
        """The work statements of the flow, in program order (nested blocks included)."""
        return tuple(nd for nd in walk_nodes(self.body) if isinstance(nd, Work))

    @property
    def unknowns(self) -> tuple[str, ...]:
        """The symbols of the flow's opaque blocks (unknown trip counts), in program order."""
        return tuple(nd.symbol for nd in walk_nodes(self.body) if isinstance(nd, Opaque))


def walk_nodes(nodes):
    """Every node of ``nodes`` and of the blocks nested in them, in program order (pre-order)."""
    for nd in nodes:
        yield nd
        if isinstance(nd, (Loop, Opaque)):
            yield from walk_nodes(nd.body)
        elif isinstance(nd, Branch):
            yield from walk_nodes(nd.then)
            yield from walk_nodes(nd.orelse)


def assigned_vars(nodes) -> tuple[str, ...]:
    """Every iteration variable assigned anywhere in ``nodes`` (nested loops included), in order."""
    out: list[str] = []
    for nd in walk_nodes(nodes):
        if isinstance(nd, (Assign, Opaque)):
            out.extend(t for t in (nd.targets if isinstance(nd, Assign) else nd.assigned) if t not in out)
    return tuple(out)
