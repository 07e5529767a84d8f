"""Tables of the CLI that never cut the answer: columns wrap, or the rows stack, instead of ``…``.

Every verb's human table goes through :func:`print_table`.  A :class:`Column` is either *whole* (its
lines are never broken: numbers, matrix rows, one instruction of a program) or wrapping (prose, broken at
spaces).  The widths are computed here, not by rich: every whole column gets its widest line, every
wrapping column its longest word, and the space left is shared by the wrapping columns up to their
natural width.  When even those minimums do not fit the console (an 80-column terminal and a wide
matrix), each row is printed as a block of ``column  value`` lines instead.  Under the table, each
column is explained once (:attr:`Column.explain`).

Multi-line cells carry their own line breaks: :func:`program_lines` puts one instruction of a reduction
program per line, :func:`matrix_lines` one axis (with its name) per line.

User text is printed literally: :func:`safe_markup` keeps only the balanced style tags the verbs write
(``[bold]…[/bold]``, ``[red]…[/red]``, …) and escapes every other ``[…]`` (``rowstr[j]``, a file named
``[red]m.py``), and :func:`make_console` returns a console that applies it to every string it prints (tables
included) and, when not on a terminal, writes no trailing spaces.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Sequence

__all__ = ["Column", "print_table", "program_lines", "matrix_lines", "safe_markup", "make_console"]

#: the style tags the verbs write; anything else in brackets is user text
STYLES = frozenset({"bold", "dim", "italic", "green", "red", "yellow", "cyan", "bold green", "bold red",
                    "bold yellow"})
_TAG = re.compile(r"(\\*)\[([a-z#/@][^\[]*?)\]")


def safe_markup(text: str) -> str:
    """``text`` with every ``[…]`` escaped except balanced pairs of :data:`STYLES` tags (``[red]x[/red]`` or
    ``[red]x[/]``), so user text (paths, program notes) prints as written."""
    if "[" not in text:
        return text
    tags = list(_TAG.finditer(text))
    keep, open_ = set(), []
    for i, m in enumerate(tags):
        if m.group(1):  # already escaped
            continue
        body = m.group(2)
        if body.startswith("/"):
            for k in range(len(open_) - 1, -1, -1):
                if body[1:] in ("", open_[k][1]):
                    keep.update((open_[k][0], i))
                    del open_[k]
                    break
        elif body in STYLES:
            open_.append((i, body))
    out, pos = [], 0
    for i, m in enumerate(tags):
        if m.group(1) or i in keep:
            continue
        out += [text[pos:m.start()], "\\", m.group(0)]
        pos = m.end()
    return "".join(out) + text[pos:]


class _NoTrailingSpaces:
    """A file that writes each line without its trailing spaces (rich pads table lines to the width)."""

    def __init__(self, raw) -> None:
        self._raw, self._tail = raw, ""

    def write(self, text: str) -> int:
        lines = (self._tail + text).split("\n")
        self._tail = lines.pop()
        if lines:
            self._raw.write("".join(ln.rstrip(" ") + "\n" for ln in lines))
        return len(text)

    def flush(self) -> None:
        if self._tail:
            self._raw.write(self._tail)
            self._tail = ""
        self._raw.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._raw, name)


def _as_table(obj):
    """``(columns, rows, title)`` of a rich Table of text cells (print_table's arguments), else None: a column
    whose cells are all one word (numbers, types, names) is kept whole, the others wrap at spaces."""
    from rich.table import Table
    from rich.text import Text

    if not isinstance(obj, Table) or not obj.columns or getattr(obj, "_laid_out", False):
        return None
    cells = []
    for col in obj.columns:
        col_cells = []
        for c in col._cells:  # noqa: SLF001 - rich has no public accessor for a column's cells
            if isinstance(c, Text):
                c = c.markup
            if not isinstance(c, str):
                return None
            col_cells.append(c)
        cells.append(col_cells)
    header = [c.header.plain if isinstance(c.header, Text) else str(c.header) for c in obj.columns]
    columns = [Column(h, justify=c.justify if c.justify in ("left", "right") else "left",
                      whole=all(" " not in ln.strip() for cell in cc for ln in cell.split("\n")))
               for h, c, cc in zip(header, obj.columns, cells)]
    rows = [tuple(cc[i] for cc in cells) for i in range(obj.row_count)]
    title = obj.title.plain if isinstance(obj.title, Text) else obj.title
    return columns, rows, title


def make_console(width: int | None = None, file=None):
    """A rich console that prints user text literally (:func:`safe_markup`) and, off a terminal, at ``width``
    columns without trailing spaces."""
    import sys

    from rich.console import Console

    class LiteralConsole(Console):
        def render_str(self, text, **kw):  # every string printed, table cells and titles included
            return super().render_str(safe_markup(text), **kw)

        def print(self, *objects, **kw):  # a verb's rich Table prints as print_table's: one style, never cut
            table = _as_table(objects[0]) if len(objects) == 1 else None
            if table is None:
                return super().print(*objects, **kw)
            return print_table(self, *table, explain=False)

    raw = file if file is not None else sys.stdout
    if width is None:
        return LiteralConsole(highlight=False, file=raw)
    return LiteralConsole(highlight=False, width=width, file=_NoTrailingSpaces(raw))


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, justification, whether its lines are kept whole, and the sentence that
    explains it under the table (empty: not explained)."""

    header: str
    justify: str = "right"
    whole: bool = True
    explain: str = ""


def matrix_lines(matrix: Sequence[Sequence[int]], names: Sequence[str] | None = None) -> str:
    """A parallelism matrix one axis per line, ``name [f_1,…,f_L]`` (row = axis, entry = how many ways
    the axis is split across that level; P2 §3.1)."""
    from meshplan.models.placement.problem import axis_names as as_axis_names

    rows = [list(r) for r in matrix]
    names = as_axis_names(names, len(rows))
    pad = max(len(n) for n in names) if names else 0
    return "\n".join(f"{n:<{pad}} [{','.join(str(int(x)) for x in r)}]" for n, r in zip(names, rows))


def program_lines(text: str) -> str:
    """A reduction program one instruction per line, collectives abbreviated (AR, RS, AG, R, B):
    ``RS(node) ;`` / ``AR(node,Parallel(root)) ;`` / ``AG(node)``.  Accepts the compact form
    (``RS(node) ; AG(node)``) or the text format (``ReduceScatter slice=node form=InsideGroup; …``)."""
    from meshplan.models.core.collectives import Collective
    from meshplan.models.core.errors import ModelError

    parts = []
    for ins in text.replace("\n", ";").split(";"):
        w = ins.split()
        if not w:
            continue
        if len(w) == 3 and w[1].startswith("slice=") and w[2].startswith("form="):
            form = w[2][5:]
            try:
                name = Collective.parse(w[0]).short
            except ModelError:
                name = w[0]
            parts.append(f"{name}({w[1][6:]}{'' if form == 'InsideGroup' else ',' + form})")
        else:
            parts.append(" ".join(w))
    return " ;\n".join(parts) if parts else "-"


#: spaces between two columns of a table
_GAP = 2


def _plain(cell: str) -> list[str]:
    from rich.text import Text

    return Text.from_markup(safe_markup(cell)).plain.split("\n")


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int] | None:
    """Column content widths that fit ``width`` (borders included), or ``None`` when the minimums do not."""
    lines = [[_plain(r[j]) for r in rows] + [[c.header]] for j, c in enumerate(columns)]
    natural = [max(len(ln) for cell in col for ln in cell) for col in lines]
    # a whole column needs its widest cell (the header may wrap at its spaces), a wrapping one its longest word
    least = [max([len(ln) for cell in col[:-1] for ln in cell] + [len(w) for w in c.header.split()] + [1])
             if c.whole else max([len(w) for cell in col for ln in cell for w in ln.split()] + [1])
             for c, col in zip(columns, lines)]
    room = width - _GAP * (len(columns) - 1)
    if sum(least) > room:
        return None
    widths = list(least)
    spare = room - sum(widths)
    grow = [j for j, c in enumerate(columns) if natural[j] > widths[j]]
    while spare > 0 and grow:  # share what is left, one column at a time, narrowest need first
        grow.sort(key=lambda j: natural[j] - widths[j])
        j = grow[0]
        share = min(natural[j] - widths[j], max(1, spare // len(grow)))
        widths[j] += share
        spare -= share
        if widths[j] >= natural[j]:
            grow.pop(0)
    return widths


def print_table(con, columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None = None, *,
                explain: bool = True) -> None:
    """Print ``rows`` (cells: rich markup, ``\\n`` for line breaks) under ``columns`` on ``con``: a table
    whose columns wrap to the console's width, or, when it cannot fit, one block per row (titled by the
    first column); then one line per explained column."""
    from rich import box
    from rich.table import Table

    widths = _widths(columns, rows, con.width)
    if widths is not None:  # a rule under the header, _GAP spaces between columns, no outer edge
        t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        t._laid_out = True  # widths chosen here: the console prints it as it is
        for c, w in zip(columns, widths):
            header = "\n".join(textwrap.wrap(c.header, w)) if len(c.header) > w else c.header
            t.add_column(header, justify=c.justify, width=w, no_wrap=c.whole, overflow="fold")
        for r in rows:
            t.add_row(*r)
        con.print(t)
    else:
        if title:
            con.print(title)
        for r in rows:
            con.print(f"[bold]{columns[0].header} {r[0]}[/bold]")
            g = Table.grid(padding=(0, 2))
            g._laid_out = True
            g.add_column(no_wrap=True)
            g.add_column(overflow="fold")
            for c, cell in zip(columns[1:], r[1:]):
                g.add_row("  " + c.header, cell)
            con.print(g)
    if explain:
        for c in columns:
            if c.explain:
                con.print(f"[dim]{c.header}[/dim]: {c.explain}", highlight=False)
