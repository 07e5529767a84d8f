"""Pictures of placements and reduction programs (``meshplan show``, docs/show.md).

:func:`draw_schedule` is ``meshplan show``; :func:`draw_program` draws a system's devices grouped by hardware level
(nested boxes; the innermost level runs left to right, the next one top to
bottom, and so on, alternating), each device coloured by its reduction group
(the coordinates on the non-reduction axes) and labelled with its axis
coordinates (``n/m`` as in P2 Figure 2).  The first panel shows the
placement; then one panel per program step outlines that step's device groups
(one colour per group, a line through the members in order, the root drawn
with a thick edge; devices outside every group are faded).

matplotlib is used headless: figures are built with
:class:`matplotlib.figure.Figure` and written by its Agg canvas, so no display
and no global backend switch are needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from meshplan.api.results import Result, value
from meshplan.models.core.errors import ModelError
from meshplan.models.core.outputs import check_output_path, write_output
from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.reduction.lowering import LoweredProgram

__all__ = ["device_positions", "draw_program", "Drawing", "draw_schedule"]


def device_positions(sizes: Sequence[int]) -> tuple[list[tuple[float, float]], float, float]:
    """``(positions, width, height)``: the lower-left corner of every device's unit square.

    Level ``n-1`` (devices) runs along x, level ``n-2`` along y, level ``n-3``
    along x again, …; gaps grow with the level's depth so units stay apart."""
    n = len(sizes)
    horiz = [(n - 1 - j) % 2 == 0 for j in range(n)]
    gap = [0.15 + 0.35 * (n - 1 - j) for j in range(n)]
    ext = [(1.0, 1.0)] * n  # extent (w, h) of one unit of level j
    for j in range(n - 2, -1, -1):
        w, h = ext[j + 1]
        s, g = sizes[j + 1], gap[j + 1]
        ext[j] = (s * w + (s - 1) * g, h) if horiz[j + 1] else (w, s * h + (s - 1) * g)
    w0, h0 = ext[0]
    W = sizes[0] * w0 + (sizes[0] - 1) * gap[0] if horiz[0] else w0
    H = h0 if horiz[0] else sizes[0] * h0 + (sizes[0] - 1) * gap[0]
    stride = [(ext[j][0] + gap[j]) if horiz[j] else (ext[j][1] + gap[j]) for j in range(n)]
    pos = []
    for d in range(math.prod(sizes)):
        rest, coords = d, []
        for s in reversed(sizes):
            coords.append(rest % s)
            rest //= s
        coords.reverse()
        x = sum(c * stride[j] for j, c in enumerate(coords) if horiz[j])
        y = sum(c * stride[j] for j, c in enumerate(coords) if not horiz[j])
        pos.append((x, H - 1 - y))  # first units at the top
    return pos, W, H


def _unit_boxes(matrix: ParallelismMatrix, pos):
    """(level, label, x0, y0, x1, y1) for every unit of every level above the devices with > 1 device."""
    s = matrix.system
    boxes = []
    for j in range(len(s.levels) - 1):
        units: dict[tuple[int, ...], list[int]] = {}
        for d in range(s.num_devices):
            units.setdefault(s.coords(d)[:j + 1], []).append(d)
        pad = 0.08 + 0.12 * (len(s.levels) - 2 - j)
        for key, devs in units.items():
            xs = [pos[d][0] for d in devs]
            ys = [pos[d][1] for d in devs]
            boxes.append((j, f"{s.levels[j].name} {key[-1]}", min(xs) - pad, min(ys) - pad,
                          max(xs) + 1 + pad, max(ys) + 1 + pad))
    return boxes


def _draw_panel(ax, matrix: ParallelismMatrix, reduce: Sequence[int], pos, W, H, title: str,
                groups: Sequence[Sequence[int]] | None) -> None:
    from matplotlib import colormaps
    from matplotlib.patches import FancyBboxPatch, Rectangle

    s = matrix.system
    red = set(reduce)
    keys = sorted({tuple(v for i, v in enumerate(matrix.axis_coords(d)) if i not in red)
                   for d in range(s.num_devices)})
    fill = colormaps["Pastel1" if len(keys) <= 9 else "tab20"]
    colour_of = {k: fill(i % fill.N) for i, k in enumerate(keys)}
    for (j, label, x0, y0, x1, y1) in _unit_boxes(matrix, pos):
        ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.15",
                                    fill=False, edgecolor="0.6", linewidth=0.8 + 0.4 * (len(s.levels) - 2 - j)))
        if s.levels[j].size > 1:  # alternate sides by level so nested labels never overlap
            right = (len(s.levels) - 2 - j) % 2 == 0
            ax.text(x1 - 0.05 if right else x0 + 0.05, y1 + 0.03, label, fontsize=6, color="0.4", va="bottom",
                    ha="right" if right else "left")
    member = {}
    if groups is not None:
        for gi, g in enumerate(groups):
            for i, d in enumerate(g):
                member[d] = (gi, i)
    edge_map = colormaps["tab10"]
    for d, (x, y) in enumerate(pos):
        ac = matrix.axis_coords(d)
        key = tuple(v for i, v in enumerate(ac) if i not in red)
        faded = groups is not None and d not in member
        ax.add_patch(Rectangle((x + 0.08, y + 0.08), 0.84, 0.84, facecolor=colour_of[key],
                               edgecolor="0.3", linewidth=0.6, alpha=0.35 if faded else 1.0))
        ax.text(x + 0.5, y + 0.58, "/".join(map(str, ac)), ha="center", va="center", fontsize=7,
                alpha=0.4 if faded else 1.0)
        ax.text(x + 0.5, y + 0.25, f"d{d}", ha="center", va="center", fontsize=5, color="0.35",
                alpha=0.4 if faded else 1.0)
    if groups is not None:
        for gi, g in enumerate(groups):
            col = edge_map(gi % edge_map.N)
            for i, d in enumerate(g):
                x, y = pos[d]
                ax.add_patch(Rectangle((x + 0.03, y + 0.03), 0.94, 0.94, fill=False, edgecolor=col,
                                       linewidth=2.6 if i == 0 else 1.4))
            if len(g) > 1:
                ax.plot([pos[d][0] + 0.5 for d in g], [pos[d][1] + 0.5 for d in g], color=col, linewidth=1.0,
                        alpha=0.7, zorder=0.5)
    ax.set_xlim(-0.7, W + 0.7)
    ax.set_ylim(-0.7, H + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=8)


def draw_program(path: str | Path, matrix: ParallelismMatrix, reduce: Sequence[int],
                 program: LoweredProgram | None = None, *, titles: Sequence[str] = (),
                 heading: str = "", dpi: int = 110, columns: int = 3) -> int:
    """Write a PNG to exactly ``path`` (whole or not at all, :mod:`meshplan.models.core.outputs`): the
    placement, then one panel per step of ``program``; returns the panel count."""
    from matplotlib.figure import Figure

    check_png_path(path)

    pos, W, H = device_positions(matrix.system.sizes)
    steps = list(program.steps) if program is not None else []
    n = 1 + len(steps)
    cols = min(columns, n)
    rows_ = math.ceil(n / cols)
    pw = min(max(2.4, 0.42 * (W + 1.4)), 7.0)
    ph = pw * (H + 1.6) / (W + 1.4)
    fig = Figure(figsize=(pw * cols, ph * rows_ + (0.4 if heading else 0.1)))
    if heading:
        fig.suptitle(heading, fontsize=9)
    axes = fig.subplots(rows_, cols, squeeze=False)
    _draw_panel(axes[0][0], matrix, reduce, pos, W, H,
                f"placement {matrix}\n(colour = reduction group, label = axis coordinates)", None)
    for i, st in enumerate(steps, 1):
        ax = axes[i // cols][i % cols]
        title = titles[i - 1] if i - 1 < len(titles) else ""
        _draw_panel(ax, matrix, reduce, pos, W, H, f"step {i}: {st.collective}" + (f"\n{title}" if title else ""),
                    st.groups)
    for k in range(n, rows_ * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    write_output(path, lambda fh: fig.savefig(fh, format="png", dpi=dpi), what="picture")
    return n


def check_png_path(path: str | Path) -> Path:
    """Raise :class:`ModelError` unless ``path`` can be written as a PNG file (docs/show.md): a writable
    regular file whose name ends in ``.png`` or has no suffix (the file is written under exactly that
    name; matplotlib's habit of appending ``.png`` is not followed, so the name reported is the file)."""
    p = check_output_path(path, what="picture")
    suffix = Path(str(path)).suffix
    if suffix and suffix.lower() != ".png":
        raise ModelError(f"cannot write the picture {str(path)!r}: it is a PNG; name the file *.png "
                         f"(not {suffix})", param="path")
    return p


@value
class Drawing(Result):
    """What :func:`draw_schedule` wrote (``meshplan show --json``): the PNG, its number of panels (the
    placement and one per step) and the schedule indices drawn."""

    png: str
    panels: int
    placement: int
    program: int


def draw_schedule(schedule: Any, png: str | Path, *, placement: Any = 0, program: Any = 0,
                  dpi: int = 110) -> Drawing:
    """Draw one placement of a schedule (a path, JSON, ``Schedule`` or ``PlacementPlan``) and the steps of
    one of its programs into the PNG ``png`` (:func:`draw_program`; docs/show.md)."""
    from meshplan.schedule import load_schedule

    check_png_path(png)  # before the work: a bad path costs nothing
    sched = load_schedule(schedule)
    pl, pr = sched.pick(placement, program)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 20 <= dpi <= 600:
        raise ModelError(f"dpi must be between 20 and 600, got {dpi}", param="dpi")
    titles = [f"slice={st.instruction.slice} form={st.instruction.form}" if st.instruction else ""
              for st in pr.lowered.steps]
    heading = (f"{sched.system.short()}, axes {list(sched.axes)}, reduce {list(sched.reduce)}: "
               f"placement {pl.id}, program {pr.id}")
    n = draw_program(png, pl.matrix, sched.reduce, pr.lowered, titles=titles, heading=heading, dpi=dpi)
    return Drawing(str(png), n, pl.id, pr.id)
