"""The text format of reduction programs that ``meshplan check`` reads (docs/check.md).

One instruction per line, ``#`` starts a comment, blank lines are ignored::

    # Reduce–AllReduce–Broadcast (P2 Figure 3c)
    Reduce    slice=server form=InsideGroup
    AllReduce slice=server form=Master(root)
    Broadcast slice=server form=InsideGroup
    AllGather groups=[[0,1],[2,3]]

A line is a collective (AllReduce, ReduceScatter, AllGather, Reduce,
Broadcast) followed by either ``slice=<level> [form=<form>]`` — an
instruction of the reduction language of P2 §3.3 over the placement's
synthesis hierarchy (d), ``form`` defaulting to ``InsideGroup`` — or
``groups=[[…],…]``: explicit disjoint groups of global device ids, first
member = root, for programs the language cannot express.  Level names are
checked only when the program is resolved against a hierarchy
(:func:`resolve`), with the line of the offending instruction.

:func:`parse_program` and :func:`format_program` round-trip:
``parse_program(format_program(p)) == p``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from meshplan.models.core.collectives import COLLECTIVES, Collective
from meshplan.models.core.errors import ModelError, ParseError
from meshplan.models.core.limits import check_limit
from meshplan.models.reduction.dsl import FORMS, Form, FormKind, Instruction, Program
from meshplan.models.reduction.hierarchy import SynthesisHierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep, lower_instruction

__all__ = ["GroupsStep", "TextProgram", "parse_program", "format_program", "resolve", "from_lowered"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


@dataclass(frozen=True, slots=True)
class GroupsStep:
    """A collective over explicit groups of global device ids (``groups=[[0,1],[2,3]]``)."""

    collective: Collective
    groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ModelError(f"unknown collective {self.collective!r}; use one of {', '.join(COLLECTIVES)}")
        object.__setattr__(self, "collective", Collective(self.collective))
        if not self.groups:
            raise ModelError("groups= needs at least one group, e.g. groups=[[0,1]]")
        seen: set[int] = set()
        for g in self.groups:
            if not g:
                raise ModelError("a device group is empty")
            for d in g:
                if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                    raise ModelError(f"device ids are non-negative integers, got {d!r}")
                if d in seen:
                    raise ModelError(f"device {d} appears in two groups of one {self.collective} step")
                seen.add(d)

    def __str__(self) -> str:
        return f"{self.collective} groups=[" + ",".join("[" + ",".join(map(str, g)) + "]"
                                                        for g in self.groups) + "]"


Item = Union[Instruction, GroupsStep]


@dataclass(frozen=True, slots=True)
class TextProgram:
    """A parsed program: its items and the 1-based source line of each."""

    items: tuple[Item, ...]
    lines: tuple[int, ...] = ()
    source: str | None = None

    def __post_init__(self) -> None:
        if not self.lines:
            object.__setattr__(self, "lines", tuple(range(1, len(self.items) + 1)))
        if len(self.lines) != len(self.items):
            raise ValueError("one line number per item")

    def __eq__(self, other: object) -> bool:  # the text, not where it came from
        return isinstance(other, TextProgram) and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def dsl_program(self) -> Program | None:
        """The program as a :class:`Program` when every line is a DSL instruction."""
        if all(isinstance(i, Instruction) for i in self.items):
            return Program(tuple(self.items))  # type: ignore[arg-type]
        return None


class _Scanner:
    def __init__(self, text: str, line: int, source: str | None) -> None:
        self.text, self.pos, self.line, self.source = text, 0, line, source

    def error(self, msg: str, pos: int | None = None) -> ParseError:
        col = (self.pos if pos is None else pos) + 1
        return ParseError(msg, line=self.line, column=col, source=self.source)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def name(self, what: str) -> str:
        self.skip_ws()
        m = _NAME.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 12] or "end of line"
            raise self.error(f"expected {what}, found {found!r}")
        self.pos = m.end()
        return m.group(0)

    def expect(self, ch: str, what: str) -> None:
        self.skip_ws()
        if self.pos >= len(self.text) or self.text[self.pos] != ch:
            found = self.text[self.pos] if self.pos < len(self.text) else "end of line"
            raise self.error(f"expected {ch!r} {what}, found {found!r}")
        self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def integer(self) -> int:
        self.skip_ws()
        m = re.compile(r"-?\d+").match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 8] or "end of line"
            raise self.error(f"expected a device id (a non-negative integer), found {found!r}")
        if m.group(0).startswith("-"):
            raise self.error(f"device ids are non-negative, got {m.group(0)}")
        self.pos = m.end()
        return int(m.group(0))

    def groups(self) -> tuple[tuple[int, ...], ...]:
        start = self.pos
        self.expect("[", "to open the list of groups, e.g. groups=[[0,1],[2,3]]")
        out: list[tuple[int, ...]] = []
        seen: dict[int, int] = {}
        while True:
            gpos = self.pos
            self.expect("[", "to open a group, e.g. [0,1]")
            g: list[int] = []
            if self.peek() == "]":
                raise self.error("a device group is empty", gpos)
            while True:
                self.skip_ws()
                dpos = self.pos
                d = self.integer()
                if d in seen:
                    where = "twice in one group" if seen[d] == len(out) else "in two groups"
                    raise self.error(f"device {d} appears {where} of one step", dpos)
                seen[d] = len(out)
                g.append(d)
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect("]", "to close the group")
                break
            out.append(tuple(g))
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == "]":
                self.pos += 1
                break
            raise self.error(f"expected ',' or ']' in the list of groups starting at column {start + 1}")
        return tuple(out)

    def form(self) -> Form:
        self.skip_ws()
        kpos = self.pos
        kind = self.name("a form: InsideGroup, Parallel(<level>) or Master(<level>)")
        if kind not in FORMS:
            raise self.error(f"unknown form {kind!r}; write InsideGroup, Parallel(<level>) or Master(<level>)", kpos)
        if kind == FormKind.INSIDE_GROUP:
            if self.peek() == "(":
                raise self.error("InsideGroup takes no level")
            return Form(kind)
        self.expect("(", f"after {kind}, e.g. {kind}(root)")
        level = self.name("a synthesis level name")
        self.expect(")", f"to close {kind}(")
        return Form(kind, level)


def _collective(sc: _Scanner) -> Collective:
    sc.skip_ws()
    pos = sc.pos
    word = sc.name("a collective")
    for c in COLLECTIVES:
        if c.value.lower() == word.lower():
            return c
    raise sc.error(f"unknown collective {word!r}; use one of {', '.join(COLLECTIVES)}", pos)


def _parse_line(text: str, line: int, source: str | None) -> Item:
    sc = _Scanner(text, line, source)
    coll = _collective(sc)
    fields: dict[str, object] = {}
    first_key_pos: dict[str, int] = {}
    while not sc.at_end():
        kpos = sc.pos
        key = sc.name("a field slice=, form= or groups=")
        if key not in ("slice", "form", "groups"):
            raise sc.error(f"unknown field {key!r}; a line has slice=<level> [form=<form>] or groups=[[…],…]", kpos)
        if key in fields:
            raise sc.error(f"field {key}= given twice", kpos)
        sc.expect("=", f"after {key}")
        first_key_pos[key] = kpos
        if key == "slice":
            fields[key] = sc.name("a synthesis level name after slice=")
        elif key == "form":
            fields[key] = sc.form()
        else:
            fields[key] = sc.groups()
    if "groups" in fields:
        other = [k for k in ("slice", "form") if k in fields]
        if other:
            raise sc.error("give either groups= or slice=/form=, not both", first_key_pos[other[0]])
        return GroupsStep(coll, fields["groups"])  # type: ignore[arg-type]
    if "slice" not in fields:
        if "form" in fields:
            raise sc.error("form= needs slice=<level> too", first_key_pos["form"])
        raise sc.error(f"{coll} needs slice=<level> [form=<form>] or groups=[[…],…]", len(text.rstrip()))
    return Instruction(coll, fields["slice"], fields.get("form", Form(FormKind.INSIDE_GROUP)))  # type: ignore[arg-type]


def parse_program(text: str, *, source: str | None = None) -> TextProgram:
    """Parse the line format; a :class:`ParseError` carries line and column."""
    items, lines = [], []
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        try:
            items.append(_parse_line(body.rstrip(), n, source))
        except ParseError:
            raise
        except ModelError as err:  # pragma: no cover - the scanner checks what the values check  # a value check of Form/Instruction/GroupsStep
            raise ParseError(str(err), line=n, column=len(body) - len(body.lstrip()) + 1, source=source) from err
        lines.append(n)
    if not items:
        raise ParseError("the program has no instructions (only blank lines or comments)", source=source)
    check_limit("steps", len(items), f"the program {source}" if source else "the program")
    return TextProgram(tuple(items), tuple(lines), source)


def format_program(program: TextProgram | Program, header: str = "") -> str:
    """The text form of a program (one instruction per line), optionally after ``# header`` lines."""
    items = program.items if isinstance(program, TextProgram) else program.instructions
    head = "".join(f"# {h}\n" if h else "#\n" for h in header.splitlines()) if header else ""
    return head + "".join(f"{i}\n" for i in items)


def resolve(program: TextProgram, h: SynthesisHierarchy) -> LoweredProgram:
    """Lower every line over hierarchy ``h`` (P2 §3.4); errors name the line."""
    n = h.matrix.system.num_devices
    steps = []
    for item, line in zip(program.items, program.lines):
        try:
            if isinstance(item, Instruction):
                steps.append(lower_instruction(h, item))
            else:
                for g in item.groups:
                    for d in g:
                        if d >= n:
                            raise ModelError(f"device {d} out of range: the system has {n} devices (0..{n - 1})")
                steps.append(LoweredStep(item.collective, item.groups))
        except ParseError:
            raise
        except ModelError as err:
            raise ParseError(f"`{item}`: {err}", line=line, source=program.source) from err
    return LoweredProgram(tuple(steps), n)


def from_lowered(lowered: LoweredProgram) -> TextProgram:
    """A text program for a lowered one: its DSL instruction where known, else its groups."""
    items: list[Item] = []
    for st in lowered.steps:
        items.append(st.instruction if st.instruction is not None else GroupsStep(st.collective, st.groups))
    return TextProgram(tuple(items))
