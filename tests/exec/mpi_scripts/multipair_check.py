"""Wire-cost redistribution plans, multi-pair all-to-alls among them, on 8 real ranks (run by
tests/exec/test_redistribution_multipair.py): each program bound as a user binds it, its result compared with
numpy's tile of the global array, and the bytes the executor handed to MPI (the runtime's counting rules: a
collective's whole send buffer, its own piece included) compared with the plan's steps: one Alltoall of the
whole tile per all-to-all (one per multi-pair all-to-all, not one per pair), one Allgather of the tile, the tile
once for a permutation; the busiest rank's."""

from __future__ import annotations

import json
import random
import sys

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime.guard import abort_on_error
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.sample import random_problem

COMM = MPI.COMM_WORLD
MERGED = [("x=2,y=2,z=2", "[4{x}8,4{y}8,8]", "[8,8,2{y,x}8]"),
          ("x=2,y=2,z=2", "[4{x}8,4{y}8,8]", "[8,8,2{x,y}8]"),
          ("x=2,y=2,z=2", "[4{x}8,2{z,y}8,8]", "[8,8,1{y,x,z}8]"),
          ("x=2,y=4", "[16{x}32,8{y}32,8]", "[32,32,1{y,x}8]"),
          ("x=2,y=4", "[4{x}8,2{y}8,6]", "[8,8,3{x}6]"),
          ("x=2,y=2,z=2", "[4{x}8,4{y}8,8,8]", "[8,8,4{x}8,4{y}8]"),
          ("x=2,y=2,z=2", "[4{x}8,2{z,y}8,8,4]", "[8,8,2{z,x}8,2{y}4]")]
# permutations split among the replicas of each tile (models/redistribution/split.py)
SPLIT = [("x=2,y=4", "[8,12{y}48]", "[8,24{x}48]"),
         ("x=2,y=2,z=2", "[16,4{y,z}16,16]", "[16,4{z,y}16,16]"),
         ("x=2,y=4", "[4{y}16,48]", "[8{x}16,48]")]


def main() -> None:
    rng = random.Random(26)
    problems = list(MERGED) + list(SPLIT)
    meshes = [Mesh((("x", 2), ("y", 2), ("z", 2))), Mesh((("x", 2), ("y", 4))), Mesh((("x", 8),))]
    for k in range(24):
        pr = random_problem(rng, meshes[k % 3], max_rank=4, factors=(1, 2, 3))
        problems.append((pr.mesh.cli(), str(pr.src), str(pr.dst)))
    cases = []
    for mesh, src, dst in problems:
        plan = mp.plan_redistribution(src, dst, mesh, dtype="i64", cost="wire")
        with plan.bind(COMM) as ex:
            g = np.arange(np.prod(ex.global_shape), dtype=np.int64).reshape(ex.global_shape)
            y = ex(ex.source_tile(g))
            ok = bool(COMM.allreduce(bool(np.array_equal(y, ex.target_tile(g))), op=MPI.LAND))
            sent = int(COMM.allreduce(ex.counter.sent, op=MPI.MAX))
        handed, before = 0, plan.search.src.localsize
        for st in plan.search.steps:
            if st.step.op == "allpermute":   # the busiest rank's: a whole tile, or its chunks when split
                handed += st.step.wire_elements(before) if st.step.moved else 0
            else:
                handed += 0 if st.step.op == "dynslice" else before
            before = st.localsize
        cases.append({"problem": f"{src} -> {dst} on {mesh}", "equal": ok, "sent_bytes": sent,
                      "handed_bytes": handed * plan.itemsize,
                      "wire_bytes": plan.cost_bytes, "program": [s.op for s in plan.program],
                      "split": any(s.chunks for s in plan.program),
                      "multi_pair": any(len(s.dims) > 2 for s in plan.program if s.op == "alltoall")})
    if COMM.Get_rank() == 0:
        sys.stdout.write(json.dumps({"cases": cases}) + "\n")


if __name__ == "__main__":
    with abort_on_error(COMM):
        main()
