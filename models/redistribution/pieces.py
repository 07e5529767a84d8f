"""How a device cuts its tile into the pieces of an all-to-all, and puts the received pieces together.

Every all-to-all over a group of ``n`` devices (paper "Memory-efficient array redistribution through portable
collective communication", Rink, Kwasniewski et al., §4 and §7.1: one pair of dimensions, or several moves, see
:class:`~meshplan.models.redistribution.steps.AllToAll`) sends member ``k`` of the group (``k`` its key of
:func:`~meshplan.models.redistribution.lowlevel.groups`: the mixed-radix value of its coordinates on the group
axes, the first axis minor) the part of this device's tile that lies in member ``k``'s new tile.  Every
dimension that receives axes is cut along the received axes; every dimension that gives axes becomes the
received pieces laid side by side along the axes it gave.  Both are one reshape and one transpose, the same on
every device: :func:`exchange_layout` returns them, and each executor (numpy, torch, jax) applies them, its one
all-to-all path.  Where a side's transpose is the identity (a one-pair all-to-all that cuts or joins dimension
0) that side is the tile itself, and an executor sends from or receives into it without a copy
(:attr:`ExchangeLayout.send_is_tile`, :attr:`ExchangeLayout.recv_is_tile`); a one-pair all-to-all is also one
cut and one join of single dimensions (:attr:`ExchangeLayout.tiled`), the form of ``lax.all_to_all``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.steps import AllToAll, apply_strict
from meshplan.models.redistribution.types import Dim, DistType

__all__ = ["ExchangeLayout", "exchange_layout"]


@dataclass(frozen=True, slots=True)
class ExchangeLayout:
    """``tile.reshape(send_view).transpose(send_perm).reshape(pieces)`` is the send buffer (``pieces[0] == n``,
    piece ``k`` for the member of key ``k``); ``recv.reshape(recv_view).transpose(recv_perm).reshape(shape)``
    the new tile from the received buffer (piece ``k`` from the member of key ``k``).  ``tiled`` is
    ``(split, concat)`` for a one-pair all-to-all (§4: the ``n`` pieces are dimension ``split`` cut into ``n``
    equal parts in key order, and the new tile is the received pieces side by side along dimension ``concat``
    in key order), None for several moves."""

    n: int
    send_view: tuple[int, ...]
    send_perm: tuple[int, ...]
    pieces: tuple[int, ...]
    recv_view: tuple[int, ...]
    recv_perm: tuple[int, ...]
    shape: tuple[int, ...]
    tiled: tuple[int, int] | None = None

    @property
    def send_is_tile(self) -> bool:
        """The pieces are the tile itself, in key order (``send_perm`` the identity): sent without a copy."""
        return self.send_perm == tuple(range(len(self.send_perm)))

    @property
    def recv_is_tile(self) -> bool:
        """The received buffer is the new tile itself (``recv_perm`` the identity): received in place."""
        return self.recv_perm == tuple(range(len(self.recv_perm)))

    @property
    def sent(self) -> tuple[int, ...]:
        """The shape of ``tile.reshape(send_view).transpose(send_perm)`` (``pieces`` before its first axes are
        flattened into one): row-major, the pieces in key order."""
        return tuple(self.send_view[k] for k in self.send_perm)


def exchange_layout(mesh: Mesh, before: DistType, step: AllToAll) -> ExchangeLayout:
    """The layout of the all-to-all ``step`` from a tile of type ``before`` (the type before the step, its
    axes in any order: each giving dimension's moved axes are made minor-most, as the lowering's device map
    does, §6)."""
    out_of: dict[int, list[str]] = {}
    for i, _, ax in step.moves:
        out_of.setdefault(i, []).extend(ax)
    dims = list(before.dims)
    for i, gone in out_of.items():   # the giving dimensions' moved axes minor-most, in the moves' order
        d = dims[i]
        dims[i] = Dim(d.local, tuple(gone) + tuple(a for a in d.axes if a not in gone), d.size)
    old = DistType(tuple(dims))
    new = apply_strict(mesh, old, step)
    group = step.group_axes
    major = [a for a in reversed(group)]                 # the group axes, major first (the key's digits)
    size = {a: mesh.size(a) for a in group}
    send: list[tuple[object, int]] = []
    rest: list[tuple[object, int]] = []
    for k, (d0, d1) in enumerate(zip(old.dims, new.dims)):
        gained = d1.axes[:len(d1.axes) - len(d0.axes)] if len(d1.axes) > len(d0.axes) else ()
        if k in out_of:
            gained = ()
        send += [(a, size[a]) for a in reversed(gained)]
        piece = d0.local // math.prod(size[a] for a in gained)
        send.append((("r", k), piece))
        rest.append((("r", k), piece))
    labels = [lbl for lbl, _ in send]
    send_order = major + [lbl for lbl, _ in rest]
    recv = [(a, size[a]) for a in major] + rest
    recv_labels = [lbl for lbl, _ in recv]
    new_view: list[object] = []
    for k in range(old.rank):
        new_view += [a for a in reversed(out_of.get(k, []))] + [("r", k)]
    n = math.prod(size.values())
    return ExchangeLayout(
        n=n, send_view=tuple(s for _, s in send), send_perm=tuple(labels.index(x) for x in send_order),
        pieces=(n,) + tuple(s for _, s in rest), recv_view=tuple(s for _, s in recv),
        recv_perm=tuple(recv_labels.index(x) for x in new_view), shape=new.localtype,
        tiled=None if step.more else (step.dst, step.src))
