"""``meshplan.torch.redistribute(x, placements)``: a DTensor redistribution carried out by meshplan's plan.

The same result as ``x.redistribute(x.device_mesh, placements)``, but the collectives are the memory-bounded
program of "Memory-efficient array redistribution through portable collective communication" (Rink,
Kwasniewski et al., §7), run with ``torch.distributed``'s functional collectives on process groups built once
per step group and cached: ``all_gather_into_tensor`` for an all-gather, ``all_to_all_single`` for an
all-to-all (one pair of dimensions or several: its pieces cut and joined by the step's exchange layout,
:func:`meshplan.models.redistribution.pieces.exchange_layout`), and ``all_to_all_single`` with one non-empty
piece per rank for the final permutation; a dynamic slice is a local ``narrow``.  Nothing depends on the
backend, so the same code runs on gloo (CPU) and NCCL (GPU).  A dimension DTensor splits unevenly is padded
to whole tiles on the way in and cut back on the way out (:func:`meshplan.api.framework_plan.padded_types`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch
import torch.distributed._functional_collectives as funcol

from meshplan.api.framework_plan import FrameworkPlan, framework_plan, padded_types
from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.offsets import axes_tile_index
from meshplan.models.redistribution.pieces import exchange_layout
from meshplan.models.redistribution.split import exchange
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice
from meshplan.models.redistribution.types import Dim, DistType
from meshplan.torch.groups import current, on_release, process_group, world_cache
from meshplan.torch.layout import device_ranks, mesh_of, split_axes

__all__ = ["plan", "redistribute"]


def _dtype_name(dtype: torch.dtype) -> str:
    return as_dtype(str(dtype).rsplit(".", 1)[-1], what="dtype").short


def _layout_str(placements) -> str:
    return "(" + ", ".join(str(p) for p in placements) + ")"


def plan(x: Any, placements: Any, *, cost: str = "wire") -> FrameworkPlan:
    """meshplan's program for ``x.redistribute(x.device_mesh, placements)`` without moving data: its steps,
    the bytes every rank sends and the largest tile it holds (``cost``: what the search minimises, ``wire``
    bytes sent — the default here — or ``paper``, Fig. 11)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(x, DTensor):
        raise ModelError(f"x must be a DTensor, got {type(x).__name__}", param="x")
    return _plan(x.device_mesh, tuple(x.shape), tuple(x.placements), tuple(placements), x.dtype, cost)


@lru_cache(maxsize=512)
def _plan(device_mesh, shape, src_pl, dst_pl, dtype, cost) -> FrameworkPlan:
    mesh = mesh_of(device_mesh)
    src, dst = padded_types(mesh, shape, split_axes(device_mesh, src_pl, len(shape)),
                            split_axes(device_mesh, dst_pl, len(shape)))
    return framework_plan("torch", mesh, shape, src, dst, (_layout_str(src_pl), _layout_str(dst_pl)),
                          _dtype_name(dtype), cost)


def _join(pieces: torch.Tensor, dim: int) -> torch.Tensor:
    """Pieces stacked on a new first axis, concatenated along ``dim`` (piece ``k`` at ``k·size``)."""
    n, shape = pieces.shape[0], list(pieces.shape[1:])
    shape[dim] *= n
    if dim == 0:
        return pieces.reshape(shape)
    return pieces.movedim(0, dim).reshape(shape)


def _fit(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """``t`` cut or zero-padded to ``size`` along ``dim``."""
    have = t.shape[dim]
    if have == size:
        return t
    if have > size:
        return t.narrow(dim, 0, size)
    shape = list(t.shape)
    shape[dim] = size
    out = t.new_zeros(shape)
    out.narrow(dim, 0, have).copy_(t)
    return out


class _Program:
    """One plan compiled for this rank: per step, its process group and the order of the group's members.

    An unevenly split dimension is padded only while it is split: a dimension no axis splits holds its true
    size (as DTensor's tensors do), and is padded again just before a step splits it."""

    def __init__(self, fp: FrameworkPlan, device_mesh) -> None:
        self.true = tuple(fp.global_shape)
        search = fp.plan.search
        mesh, coords0 = search.mesh, search.decomposition.coords()
        ranks = device_ranks(device_mesh)
        me = ranks.index(torch.distributed.get_rank())
        state = Assignment(search.src, coords0)
        self.actions: list[tuple] = []
        everyone = process_group(ranks)
        for step in search.ops:
            new = apply_lowlevel(mesh, state, step, coords0)
            if isinstance(step, (AllGather, AllToAll)):
                color, key, n = groups(mesh, state, step)
                mine = None
                for c in sorted(set(color.tolist())):  # every rank makes every group, in one order
                    members = [d for d in range(len(ranks)) if color[d] == c]
                    pg = process_group(tuple(ranks[d] for d in members))
                    if c == color[me]:
                        by_rank = sorted(members, key=lambda d: ranks[d])   # group rank order
                        keys = [int(key[d]) for d in by_rank]               # piece index of group rank r
                        order = [keys.index(k) for k in range(n)]           # group rank holding piece k
                        mine = (pg, keys, order)
                pg, keys, order = mine
                ident = keys == list(range(n))
                if isinstance(step, AllGather):
                    self.actions.append(("allgather", step.dim, n, pg, None if ident else order,
                                         not new.type.dims[step.dim].axes))
                else:   # an all-to-all (one pair of dimensions or several): pieces and joins by its layout
                    takers = sorted({j for _, j, _ in step.moves})
                    givers = sorted({i for i, _, _ in step.moves})
                    # a dimension the step leaves alone keeps its true size here while no axis splits it
                    held = DistType(tuple(d if d.axes or k in takers or k in givers
                                          else Dim(self.true[k], (), self.true[k])
                                          for k, d in enumerate(state.type.dims)))
                    self.actions.append(("alltoall", exchange_layout(mesh, held, step), n, pg,
                                         None if ident else (keys, order),
                                         tuple(i for i in givers if not new.type.dims[i].axes),
                                         tuple((j, state.type.dims[j].local) for j in takers)))
            elif isinstance(step, DynSlice):
                c = new.type.dims[step.dim].local
                v = int(axes_tile_index(mesh, step.axes, state.coords)[me])
                self.actions.append(("dynslice", step.dim, v * c, c))
            elif isinstance(step, AllPermute) and step.holders is not None:   # chunks from every holder
                grank = sorted(ranks)
                sends, recvs = exchange(step, me, state.type.localsize)
                at = lambda pairs: sorted((grank.index(ranks[p]), lo, hi) for p, lo, hi in pairs)  # noqa: E731
                self.actions.append(("split", everyone, len(ranks), at(sends), at(recvs), state.type.localtype,
                                     tuple(i for i, d in enumerate(new.type.dims) if not d.axes)))
            elif isinstance(step, AllPermute):
                grank = sorted(ranks)
                self.actions.append(("allpermute", everyone, len(ranks), grank.index(ranks[step.source.index(me)]),
                                     grank.index(ranks[step.source[me]])))
            state = new

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        for act in self.actions:
            kind = act[0]
            if kind == "allgather":
                _, dim, n, pg, order, whole = act
                got = funcol.wait_tensor(funcol.all_gather_single(t.contiguous(), 0, pg))
                pieces = got.reshape((n,) + tuple(t.shape))
                if order is not None:
                    pieces = pieces[order]
                t = _join(pieces, dim)
                if whole:
                    t = _fit(t, dim, self.true[dim])
            elif kind == "alltoall":
                _, lay, n, pg, perm, whole, padded = act
                for j, size in padded:
                    t = _fit(t, j, size)
                pieces = t.reshape(lay.send_view).permute(lay.send_perm).reshape(lay.pieces)
                if perm is not None:
                    pieces = pieces[perm[0]]
                got = funcol.wait_tensor(funcol.all_to_all_single(pieces.contiguous(), None, None, pg))
                if perm is not None:
                    got = got[perm[1]]
                t = got.reshape(lay.recv_view).permute(lay.recv_perm).reshape(lay.shape)
                for i in whole:
                    t = _fit(t, i, self.true[i])
            elif kind == "dynslice":
                _, dim, lo, c = act
                t = _fit(t.narrow(dim, min(lo, t.shape[dim]), max(0, min(c, t.shape[dim] - lo))), dim, c)
            elif kind == "split":   # the tile at its padded shape, chunks of it by all_to_all_single
                _, pg, size, sends, recvs, local, whole = act
                for i, n in enumerate(local):
                    t = _fit(t, i, n)
                flat = t.contiguous().reshape(-1)
                ins, outs = [0] * size, [0] * size
                for r, lo, hi in sends:
                    ins[r] = hi - lo
                for r, lo, hi in recvs:
                    outs[r] = hi - lo
                send = torch.cat([flat[lo:hi] for _, lo, hi in sends]) if sends else flat[:0]
                got = funcol.wait_tensor(funcol.all_to_all_single(send.contiguous(), outs, ins, pg))
                if recvs:
                    new = torch.empty_like(flat)
                    at = 0
                    for _, lo, hi in recvs:
                        new[lo:hi] = got[at:at + hi - lo]
                        at += hi - lo
                    t = new.reshape(t.shape)
                for i in whole:
                    t = _fit(t, i, self.true[i])
            else:
                _, pg, size, dest, source = act
                flat = t.contiguous().reshape(-1)
                ins, outs = [0] * size, [0] * size
                ins[dest], outs[source] = flat.numel(), flat.numel()
                got = funcol.wait_tensor(funcol.all_to_all_single(flat, outs, ins, pg))
                t = got.reshape(t.shape)
        return t


_PROGRAMS = world_cache()   # per pair, under the current default group
on_release(_plan.cache_clear)   # its keys hold DeviceMeshes, and with them their groups


def _move(mesh, shape: tuple, src_pl: tuple, dst_pl: tuple, local: torch.Tensor, cost: str) -> torch.Tensor:
    """This rank's tile of the global array under ``src_pl`` turned into its tile under ``dst_pl``, by
    meshplan's program for the pair (built once per pair and cached)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    fp = _plan(mesh, shape, src_pl, dst_pl, local.dtype, cost)
    current()
    key = (mesh, fp.src, fp.dst, fp.cost_model)
    prog = _PROGRAMS.get(key)
    if prog is None:
        prog = _PROGRAMS[key] = _Program(fp, mesh)
    t = local
    for i, d in enumerate(fp.plan.search.src.dims):
        if d.axes:  # an uneven chunk of a split dimension: padded to the whole tile
            t = _fit(t, i, d.local)
    y = prog(t)
    want, _ = compute_local_shape_and_global_offset(shape, mesh, dst_pl)
    if tuple(y.shape) != tuple(want):
        y = y[tuple(slice(0, s) for s in want)]
    y = y.contiguous()
    if y.data_ptr() == local.data_ptr():
        y = y.clone()
    return y


class _Redistribute(torch.autograd.Function):
    """The local step of :func:`redistribute` for autograd.  A redistribution leaves the logical array as it
    is, so its gradient is the gradient redistributed back, ``dst → src`` — DTensor's own rule for
    ``redistribute`` — and that reverse move is meshplan's plan for the reverse pair."""

    @staticmethod
    def forward(ctx, local, mesh, shape, src_pl, dst_pl, cost):
        ctx.args = (mesh, shape, src_pl, dst_pl, cost)
        return _move(mesh, shape, src_pl, dst_pl, local, cost)

    @staticmethod
    def backward(ctx, grad):
        mesh, shape, src_pl, dst_pl, cost = ctx.args
        return _move(mesh, shape, dst_pl, src_pl, grad.contiguous(), cost), None, None, None, None, None


def redistribute(x: Any, placements: Any, *, cost: str = "wire") -> Any:
    """``x.redistribute(x.device_mesh, placements)`` carried out by meshplan's plan (see the module docstring):
    a new DTensor on the same mesh with ``placements`` (``Shard``, ``Replicate`` and ``_StridedShard`` for the
    other order of several mesh dimensions on one tensor dimension; docs/frameworks.md).  Every rank of the
    default process group must call it (the first call of a plan builds its process groups).  It is
    differentiable: the gradient flows back by meshplan's plan for ``placements → x.placements``."""
    from torch.distributed.tensor import DTensor

    plan(x, placements, cost=cost)   # validates x, placements and cost
    mesh, dst_pl = x.device_mesh, tuple(placements)
    y = _Redistribute.apply(x.to_local(), mesh, tuple(x.shape), tuple(x.placements), dst_pl, cost)
    return DTensor.from_local(y, mesh, dst_pl, run_check=False, shape=x.shape, stride=x.stride())
