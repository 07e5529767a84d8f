"""Run by test_torch_groups.py as a script (``python torch_reinit_program.py PORT0 PORT1``): two gloo processes
use meshplan.torch, destroy the default group, make a new one and use meshplan.torch again.  Each round checks
the results against DTensor and ``dist.all_reduce``, and that no group of the first round is still cached;
rank 0 prints one JSON line per round."""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import meshplan
import meshplan.torch as mpt
from meshplan.torch import groups


def main(rank: int, ports: list) -> None:
    old: list = []
    for round_, port in enumerate(ports):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=2)
        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("a",))
        x = distribute_tensor(torch.arange(8 * 6).reshape(8, 6), mesh, [Shard(0)])
        y = mpt.redistribute(x, [Shard(1)])
        equal = torch.equal(y.to_local(), x.redistribute(mesh, [Shard(1)]).to_local())
        z = mpt.redistribute(x, [Replicate()])
        equal &= torch.equal(z.to_local(), torch.arange(8 * 6).reshape(8, 6))
        program = meshplan.solve_placement("node=1,gpu=2", "2", "0").program(0, 0)
        g = torch.arange(5, dtype=torch.int64) * (rank + 1)
        ref = g.clone()
        dist.all_reduce(ref)
        mpt.all_reduce(g, program)
        equal &= torch.equal(g, ref)
        held = list(groups._CACHE.values())
        stale = any(any(pg is o for o in old) for pg in held)
        old = held
        if rank == 0:
            print(json.dumps({"round": round_, "equal": bool(equal), "groups": len(held), "stale": stale}),
                  flush=True)
        dist.barrier()
        dist.destroy_process_group()
    groups.release()
    if rank == 0:
        print(json.dumps({"released": len(groups._CACHE)}), flush=True)


if __name__ == "__main__":
    mp.spawn(main, args=([int(p) for p in sys.argv[1:3]],), nprocs=2)
