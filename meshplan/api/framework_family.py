"""A seeded family of redistribution problems for the framework adapters (docs/frameworks.md).

Each problem is a mesh (4 or 8 devices, 2 or 3 named axes), a 2-D or 3-D global shape and, per array
dimension, the mesh axes that split it before (``src``) and after (``dst``), minor first (the paper's order,
"Memory-efficient array redistribution through portable collective communication", §2.1).  The kinds cover
what the adapters must translate: a shard moving to another dimension (``transpose``), to other mesh axes
(``move``), several axes on one dimension in the other order (``order``), replicated to sharded and back
(``shard``, ``gather``), any two layouts (``mixed``) and sizes the mesh does not divide (``uneven``: one axis
per split dimension, the only uneven splits PyTorch and JAX cut alike).
"""

from __future__ import annotations

import math
import random

from meshplan.models.core.values import Value, value

__all__ = ["FamilyProblem", "framework_family", "multi_pair_problems", "MESHES", "KINDS"]

MESHES = ((("a", 2), ("b", 2)), (("a", 2), ("b", 4)), (("a", 4), ("b", 2)), (("a", 2), ("b", 2), ("c", 2)))
KINDS = ("transpose", "move", "order", "shard", "gather", "mixed", "uneven")


@value
class FamilyProblem(Value):
    """One problem: ``mesh`` ((name, size) pairs), ``shape``, and per dimension the axes (minor first)
    splitting it before (``src``) and after (``dst``)."""

    kind: str
    mesh: tuple[tuple[str, int], ...]
    shape: tuple[int, ...]
    src: tuple[tuple[str, ...], ...]
    dst: tuple[tuple[str, ...], ...]

    @property
    def devices(self) -> int:
        return math.prod(k for _, k in self.mesh)

    def __str__(self) -> str:
        def t(axes):
            return "[" + ",".join(f"{{{','.join(a)}}}{n}" if a else str(n) for a, n in zip(axes, self.shape)) + "]"
        return f"{t(self.src)} -> {t(self.dst)} on {','.join(f'{a}={k}' for a, k in self.mesh)}"


def _random_layout(rng: random.Random, names: list[str], rank: int, p_rep: float = 0.25) -> list[list[str]]:
    dims: list[list[str]] = [[] for _ in range(rank)]
    for a in rng.sample(names, len(names)):
        if rng.random() >= p_rep:
            dims[rng.randrange(rank)].append(a)
    return dims


def _one(rng: random.Random, kind: str) -> FamilyProblem | None:
    mesh = rng.choice(MESHES)
    names, size = [a for a, _ in mesh], dict(mesh)
    rank = rng.choice((2, 3))
    src = _random_layout(rng, names, rank, 0.0 if kind in ("gather", "order", "transpose") else 0.25)
    if kind == "transpose":        # the axes of one dimension move to another, in order
        i = rng.choice([k for k in range(rank) if src[k]] or [0])
        j = rng.choice([k for k in range(rank) if k != i])
        dst = [list(d) for d in src]
        dst[j], dst[i] = src[i] + src[j], []
    elif kind == "move":           # a dimension's axes are exchanged for unused (or other dims') axes
        i = rng.choice([k for k in range(rank) if src[k]] or [0])
        others = [a for a in names if a not in src[i]]
        if not others or not src[i]:
            return None
        dst = [[a for a in d if a not in others] for d in src]
        dst[i] = rng.sample(others, rng.randint(1, len(others)))
    elif kind == "order":          # several axes on one dimension, the other order
        i = rng.randrange(rank)
        src = [[] for _ in range(rank)]
        src[i] = rng.sample(names, rng.randint(2, len(names)))
        dst = [list(d) for d in src]
        dst[i] = list(reversed(src[i]))
        if rng.random() < 0.5:
            src, dst = dst, src
    elif kind == "shard":
        src = [[] for _ in range(rank)]
        dst = _random_layout(rng, names, rank, 0.0)
    elif kind == "gather":
        dst = [[] for _ in range(rank)]
        if rng.random() < 0.5:  # a partial gather: keep one axis
            keep = rng.choice(names)
            dst = [[a for a in d if a == keep] for d in src]
    elif kind == "mixed":
        dst = _random_layout(rng, names, rank)
    else:                          # uneven: one axis per split dimension, same split size on both sides
        src = [[] for _ in range(rank)]
        dst = [[] for _ in range(rank)]
        for a in rng.sample(names, len(names)):
            free_s = [k for k in range(rank) if not src[k]]
            free_d = [k for k in range(rank) if not dst[k]]
            if free_s and rng.random() < 0.8:
                src[rng.choice(free_s)].append(a)
            if free_d and rng.random() < 0.8:
                dst[rng.choice(free_d)].append(a)
    shape = []
    for k in range(rank):
        need = math.lcm(math.prod(size[a] for a in src[k]), math.prod(size[a] for a in dst[k]))
        base = 8 * rng.randint(1, 3 if rank == 3 else 6)
        n = base * need // math.gcd(base, need)
        if kind == "uneven":
            ks = {math.prod(size[a] for a in side[k]) for side in (src, dst)} - {1}
            if len(ks) > 1:
                return None
            kk = ks.pop() if ks else 1
            n = kk * rng.randint(2, 5) - (rng.randint(1, kk - 1) if kk > 1 else 0)
        shape.append(n)
    if src == dst:
        return None
    if kind == "uneven" and all(n % 8 == 0 for n in shape):
        return None
    return FamilyProblem(kind, mesh, tuple(shape), tuple(tuple(d) for d in src), tuple(tuple(d) for d in dst))


def framework_family(n: int = 49, seed: int = 26) -> tuple[FamilyProblem, ...]:
    """``n`` distinct problems drawn with ``seed``, the kinds in turn (:data:`KINDS`): by default 7 of each, so
    that the 42 JAX can express (its sizes must divide) are at least 40 too."""
    rng = random.Random(seed)
    out: list[FamilyProblem] = []
    k = 0
    while len(out) < n:
        p = _one(rng, KINDS[k % len(KINDS)])
        if p is not None and p not in out:
            out.append(p)
            k += 1
    return tuple(out)


def multi_pair_problems() -> tuple[FamilyProblem, ...]:
    """Problems on the family's meshes whose wire-cost plan has a multi-pair all-to-all (several pairs of
    dimensions in one collective; the family's own plans have none): shards of two dimensions moving into one,
    into two, in both orders, beside a permutation, and (PyTorch only) with sizes the mesh does not divide."""
    ab, abc, ab4 = MESHES[0], MESHES[3], MESHES[1]
    return tuple(FamilyProblem("mixed", m, shape, src, dst) for m, shape, src, dst in (
        (abc, (8, 8, 8), (("a",), ("b",), ()), ((), (), ("b", "a"))),
        (abc, (8, 8, 8), (("a",), ("b",), ()), ((), (), ("a", "b"))),
        (abc, (8, 8, 16), (("a",), ("c", "b"), ()), ((), (), ("b", "a", "c"))),
        (abc, (16, 8, 8), (("a",), ("c", "b"), ()), ((), ("c",), ("b", "a"))),
        (ab4, (32, 32, 8), (("a",), ("b",), ()), ((), (), ("b", "a"))),
        (ab, (8, 8, 8), (("a",), ("b",), ()), ((), (), ("b", "a"))),
        (ab, (16, 24, 8), (("b",), ("a",), ()), ((), (), ("a", "b"))),
        (ab, (5, 7, 8), (("a",), ("b",), ()), ((), (), ("b", "a"))),
    ))
