"""The multi-pair all-to-all step: its typing (the pair rule of Fig. 8 applied move by move), its refusals,
its JSON round trip, and its exchange layout checked against numpy on every device of random problems."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.pieces import exchange_layout
from meshplan.models.redistribution.sample import random_type_axes
from meshplan.models.redistribution.serialize import step_from_dict, step_to_dict
from meshplan.models.redistribution.steps import AllToAll, apply_strict
from meshplan.models.redistribution.types import Dim, DistType, parse_type

MESH = Mesh((("x", 2), ("y", 2), ("y1", 2), ("z", 2)))


def test_moves_apply_in_order_and_print_and_round_trip():
    step = AllToAll.of([(0, 4, ("x",)), (5, 2, ("z",)), (5, 4, ("y", "y1"))])
    t = parse_type("[4{x}8,1,4,1,16,4{z,y,y1}32]")
    assert str(apply_strict(MESH, t, step)) == "[8,1,2{z}4,1,2{y,y1,x}16,32]"
    assert str(step) == "alltoall(0, 4, {x}; 5, 2, {z}; 5, 4, {y,y1})"
    assert step.group_axes == ("x", "z", "y", "y1") and step.dims == (0, 4, 5, 2)
    d = step_to_dict(step)
    assert d["moves"] == [[0, 4, ["x"]], [5, 2, ["z"]], [5, 4, ["y", "y1"]]] and step_from_dict(d) == step
    assert step_from_dict(step_to_dict(AllToAll(0, 1, ("x",)))) == AllToAll(0, 1, ("x",))


@pytest.mark.parametrize("moves,match", [
    ([(0, 1, ("x",)), (1, 2, ("y",))], "out of and into the same dimension"),
    ([(0, 1, ("x",)), (2, 1, ("x",))], "repeat an axis"),
    ([(0, 0, ("x",))], "two different dimensions"),
])
def test_bad_moves_are_refused(moves, match):
    with pytest.raises(ModelError, match=match):
        AllToAll.of(moves)


def _check(mesh: Mesh, state: Assignment, step: AllToAll) -> None:
    """Every device's new tile, assembled from its group's pieces by the layout, equals numpy's."""
    t = state.type
    new = apply_lowlevel(mesh, state, step, state.coords)
    g = np.arange(math.prod(t.globaltype)).reshape(t.globaltype)
    off0, off1 = state.offsets(mesh), new.offsets(mesh)

    def tile(off, loc):
        return g[tuple(slice(o, o + c) for o, c in zip(off, loc))]
    lay = exchange_layout(mesh, t, step)
    color, key, n = groups(mesh, state, step)
    assert n == lay.n and lay.shape == new.type.localtype
    send = [tile(off0[d], t.localtype).reshape(lay.send_view).transpose(lay.send_perm).reshape(lay.pieces)
            for d in range(len(color))]
    for d in range(len(color)):
        members = {int(key[m]): m for m in range(len(color)) if color[m] == color[d]}
        recv = np.stack([send[members[k]][int(key[d])] for k in range(n)])
        got = recv.reshape(lay.recv_view).transpose(lay.recv_perm).reshape(lay.shape)
        assert np.array_equal(got, tile(off1[d], new.type.localtype)), (str(t), str(step), d)


def test_exchange_layout_matches_numpy_on_random_steps():
    rng = random.Random(26)
    checked = 0
    while checked < 150:
        mesh = Mesh((("a", 2), ("b", 2), ("c", 3), ("d", 2))[:rng.randint(2, 4)])
        rank = rng.randint(2, 4)
        ax = random_type_axes(rng, mesh, rank, 0.2)
        ks = [math.prod(mesh.size(a) for a in ax[i]) for i in range(rank)]
        local = [6 * rng.choice((1, 2)) for _ in range(rank)]
        t = DistType(tuple(Dim(local[i], tuple(ax[i]), local[i] * ks[i]) for i in range(rank)))
        moves, givers, takers, used = [], set(), set(), set()
        for _ in range(3):
            i = rng.randrange(rank)
            free = [a for a in t.dims[i].axes if a not in used]
            js = [j for j in range(rank) if j != i and j not in givers]
            if i in takers or not free or not js:
                continue
            x = tuple(rng.sample(free, rng.randint(1, len(free))))
            j = rng.choice(js)
            moves.append((i, j, x))
            givers.add(i), takers.add(j), used.update(x)
        try:
            step = AllToAll.of(moves)
            state = Assignment(t, mesh.coords())
            apply_lowlevel(mesh, state, step, state.coords)
        except ModelError:
            continue   # no moves, or a receiving tile the moved axes do not divide
        if rng.random() < 0.5 and t.dims[0].axes:   # a relabelled device map (§6) before the step
            other = AllToAll(0, 1, t.dims[0].axes[-1:]) if rank > 1 else None
            try:
                state = apply_lowlevel(mesh, state, other, state.coords)
                apply_lowlevel(mesh, state, step, state.coords)
            except ModelError:
                state = Assignment(t, mesh.coords())
        _check(mesh, state, step)
        checked += 1


def test_one_pair_layout_is_one_cut_and_one_join():
    """Every all-to-all goes through its layout: a one-pair one cuts its target dimension into ``n`` pieces in
    key order (numpy's split) and joins the received pieces along its source dimension (numpy's concatenate);
    a side whose transpose is the identity (dimension 0) is the tile itself."""
    rng = random.Random(7)
    checked = 0
    while checked < 200:
        rank = rng.randint(2, 4)
        i, j = rng.sample(range(rank), 2)
        axes = tuple(rng.sample(MESH.names, rng.randint(1, 3)))
        n = math.prod(MESH.size(a) for a in axes)
        local = [2 * rng.randint(1, 3) for _ in range(rank)]
        local[j] *= n
        dims = [Dim(local[k], axes if k == i else (), local[k] * (n if k == i else 1)) for k in range(rank)]
        t = DistType(tuple(dims))
        lay = exchange_layout(MESH, t, AllToAll(i, j, axes))
        assert lay.n == n and lay.tiled == (j, i)
        assert lay.send_is_tile == (j == 0) and lay.recv_is_tile == (i == 0)
        tile = np.arange(math.prod(local)).reshape(local)
        pieces = tile.reshape(lay.send_view).transpose(lay.send_perm).reshape(lay.pieces)
        assert np.array_equal(pieces, np.stack(np.split(tile, n, axis=j)))
        recv = rng.sample(range(10**6), math.prod(lay.pieces))
        recv = np.array(recv).reshape(lay.pieces)
        joined = recv.reshape(lay.recv_view).transpose(lay.recv_perm).reshape(lay.shape)
        assert np.array_equal(joined, np.concatenate(list(recv), axis=i))
        checked += 1
