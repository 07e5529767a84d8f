"""``meshplan export --format mpi4py``: a standalone mpi4py program for one lowered reduction program.

The script needs only numpy and mpi4py.  It lists the steps as data (collective
and device groups, with the DSL instruction each came from as a comment),
carries a table of how each collective behaves (generated from the metadata
of :class:`~meshplan.models.core.collectives.Collective`: mpi4py method,
reduces, rooted, splits, gathers) and a short runtime that dispatches on that
table, follows the same chunk layout as :mod:`meshplan.exec.reduction.driver`
(docs/run.md), runs the program once on random
integer-valued data, checks every rank's chunks against numpy sums over its
reduction group and prints one JSON line on rank 0 (exit code 1 when wrong).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from meshplan.models.core.collectives import COLLECTIVES
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.lowering import LoweredProgram

__all__ = ["mpi4py_script", "torch_script"]

_RUNTIME = '''
def split_all(comm):
    """One sub-communicator per step (Comm.Split: colour = the rank's group, key = its place in it)."""
    rank, comms = comm.Get_rank(), []
    for _, groups in STEPS:
        color, key = MPI.UNDEFINED, 0
        for i, g in enumerate(groups):
            if rank in g:
                color, key = i, g.index(rank)
        sub = comm.Split(color, key)
        comms.append(None if sub == MPI.COMM_NULL else sub)
    return comms


def held_after(kind, held, g):
    """The chunk labels each member of group ``g`` holds after a collective of ``kind``.

    Reductions work position-wise and keep the root's labels; a split output
    leaves member i block i; a rooted reduction empties the non-roots; a gather
    concatenates and re-sorts by label; a broadcast copies the root's chunks.
    """
    root = held[g[0]]
    if kind["equal_counts"] and len({len(held[d]) for d in g}) > 1:
        raise SystemExit(f"{kind['name']} over {g}: members hold different chunk counts")
    if kind["gathers"]:
        merged = sorted(c for m in g for c in held[m])
        return {d: merged for d in g}
    if kind["splits"]:
        if len(root) % len(g):
            raise SystemExit(f"{kind['name']} over {g}: {len(root)} chunks do not split {len(g)} ways")
        b = len(root) // len(g)
        return {d: root[i * b:(i + 1) * b] for i, d in enumerate(g)}
    if kind["reduces"] and kind["rooted"]:
        return {d: (root if i == 0 else []) for i, d in enumerate(g)}
    return {d: root for d in g}


def call(kind, sub, g, held, buf):
    """This rank's MPI call for one step (the root is the group's first device); returns its new buffer."""
    method = getattr(sub, kind["method"])
    is_root = sub.Get_rank() == 0
    if kind["gathers"]:
        out = np.empty((len(buf) * len(g), buf.shape[1]), dtype=buf.dtype)
        method(buf, out)
        concat = [c for m in g for c in held[m]]
        return out[np.argsort(concat, kind="stable")]  # local re-sort by chunk label
    if kind["reduces"]:
        if kind["splits"]:
            out = np.empty((len(buf) // len(g), buf.shape[1]), dtype=buf.dtype)
            method(buf, out, MPI.SUM)
        elif kind["rooted"]:
            out = np.empty_like(buf) if is_root else None
            method(buf, out, MPI.SUM, 0)
            if out is None:
                out = buf[:0]
        else:
            out = np.empty_like(buf)
            method(buf, out, MPI.SUM)
        return out
    out = buf if is_root else np.empty((len(held[g[0]]), buf.shape[1]), dtype=buf.dtype)
    method(out, 0)
    return out


def run(comms, rank, x):
    """Run STEPS on this rank's chunks ``x`` (CHUNKS x E); return (chunk labels held, buffer).

    ``held[d]`` are the chunk labels device d holds, in buffer order; every rank
    tracks every device, so all agree on buffer sizes without communicating.
    """
    held = [list(range(CHUNKS)) for _ in range(NUM_DEVICES)]
    buf = x
    for (name, groups), sub in zip(STEPS, comms):
        kind = dict(KINDS[name], name=name)
        new = list(held)
        for g in groups:
            for d, labels in held_after(kind, held, g).items():
                new[d] = labels
        if sub is not None:
            g = next(g for g in groups if rank in g)
            buf = call(kind, sub, g, held, buf)
        held = new
    return held[rank], buf


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != NUM_DEVICES:
        if rank == 0:
            print(f"run me with mpiexec -n {NUM_DEVICES}: one rank per device", file=sys.stderr)
        raise SystemExit(2)
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    elems = max(1, nbytes // (8 * CHUNKS))
    group = next(g for g in REDUCTION_GROUPS if rank in g)
    data = {d: np.random.default_rng([0, d]).integers(-1000, 1000, size=(CHUNKS, elems)) for d in group}
    comms = split_all(comm)
    comm.Barrier()
    t0 = MPI.Wtime()
    labels, buf = run(comms, rank, data[rank])
    elapsed = comm.reduce(MPI.Wtime() - t0, op=MPI.MAX, root=0)
    want = sum(data[d] for d in group)  # what numpy says this rank must end with
    ok = list(labels) == list(range(CHUNKS)) and np.array_equal(buf, want)
    oks = comm.gather(ok, root=0)
    if rank == 0:
        bad = [d for d, o in enumerate(oks) if not o]
        print(("verified: every rank holds the sums over its reduction group" if not bad
               else f"WRONG on ranks {bad}"), file=sys.stderr)
        print(json.dumps({"verified": not bad, "ranks": NUM_DEVICES, "bad_ranks": bad, "time_s": elapsed}))
    for c in comms:
        if c is not None:
            c.Free()
    raise SystemExit(0 if all(comm.allgather(ok)) else 1)


if __name__ == "__main__":
    main()
'''


def _groups(groups: Sequence[Sequence[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


def mpi4py_script(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], *,
                  header: Sequence[str] = ()) -> str:
    """The text of a standalone ``mpiexec -n N python prog.py [BYTES]`` program performing ``program``."""
    if not reduction_groups or len({len(g) for g in reduction_groups}) != 1:
        raise ModelError("reduction groups must be non-empty and equally large")
    n = program.num_devices
    lines = ['#!/usr/bin/env python3', '"""A hierarchical reduction exported by meshplan (docs/export.md).', '']
    lines += [h.rstrip() for h in header]
    lines += ['', f'Run:  mpiexec -n {n} python THIS_FILE.py [BYTES_PER_RANK]', '',
              'Rank r plays device r of the system (devices numbered row-major over the',
              'hardware levels). Each rank splits its buffer into CHUNKS chunks, runs the',
              'steps below, and checks that it ends with every chunk summed over its',
              'reduction group. Rank 0 prints one JSON line; the exit code is 1 when wrong.',
              '"""', '', 'import json', 'import sys', '', 'import numpy as np', 'from mpi4py import MPI', '',
              f'NUM_DEVICES = {n}',
              f'CHUNKS = {len(reduction_groups[0])}  # chunks per buffer = size of a reduction group',
              f'REDUCTION_GROUPS = {_groups(reduction_groups)}', '',
              '# how each collective behaves and which mpi4py method runs it', 'KINDS = {']
    for c in COLLECTIVES:
        lines.append(f'    "{c.value}": dict(method="{c.mpi_method}", reduces={c.reduces}, rooted={c.rooted}, '
                     f'splits={c.splits_output}, gathers={c.gathers}, equal_counts={c.needs_equal_counts}),')
    lines += ['}', '', '# (collective, device groups); the first device of a group is the root', 'STEPS = [']
    for i, st in enumerate(program.steps, 1):
        if st.instruction is not None:
            lines.append(f'    # {i}. {st.instruction}')
        else:
            lines.append(f'    # {i}.')
        lines.append(f'    ("{st.collective}", {_groups(st.groups)}),')
    lines.append(']')
    return "\n".join(lines) + "\n\n" + _RUNTIME


_TORCH_RUNTIME = '''
def make_groups():
    """One process group per device group of every step, made once by every rank in the same order
    (dist.new_group is collective); returns this rank's group of each step (None: it sits out) and of its
    reduction group."""
    rank, cache, mine = dist.get_rank(), {}, []

    def group(g):
        key = tuple(sorted(g))
        if key not in cache:
            cache[key] = dist.new_group(list(key))
        return cache[key]
    for _, groups in STEPS:
        got = None
        for g in groups:
            pg = group(g)
            if rank in g:
                got = pg
        mine.append(got)
    reduction = [group(g) for g in REDUCTION_GROUPS]
    return mine, next(pg for g, pg in zip(REDUCTION_GROUPS, reduction) if rank in g)


''' + _RUNTIME[_RUNTIME.index("def held_after("):_RUNTIME.index("def call(")] + '''def call(kind, pg, g, held, buf):
    """This rank's torch collective for one step (the root is the group's first device); its new buffer.
    A process group numbers its ranks in increasing order, so blocks are reordered to and from the group's."""
    rank, ranks = dist.get_rank(), sorted(g)
    if kind["gathers"]:
        out = buf.new_empty((buf.shape[0] * len(g), buf.shape[1]))
        dist.all_gather_single(out, buf.contiguous(), group=pg)
        concat = [c for m in ranks for c in held[m]]
        return out[torch.as_tensor(np.argsort(concat, kind="stable"))]  # re-sort by chunk label
    if kind["reduces"]:
        if kind["splits"]:
            b = buf.shape[0] // len(g)   # member i keeps block i
            order = [j for m in ranks for j in range(g.index(m) * b, (g.index(m) + 1) * b)]
            out = buf.new_empty((b, buf.shape[1]))
            dist.reduce_scatter_tensor(out, buf[order].contiguous(), group=pg)
            return out
        if kind["rooted"]:
            dist.reduce(buf, dst=g[0], group=pg)
            return buf if rank == g[0] else buf[:0]
        dist.all_reduce(buf, group=pg)
        return buf
    out = buf if rank == g[0] else buf.new_empty((len(held[g[0]]), buf.shape[1]))
    dist.broadcast(out, src=g[0], group=pg)
    return out


def all_reduce(tensor, groups):
    """Sum ``tensor`` over this rank's reduction group by STEPS, in place (``groups``: make_groups()[0])."""
    rank, n = dist.get_rank(), tensor.numel()
    E = -(-n // CHUNKS)
    buf = tensor.new_zeros(CHUNKS * E)
    buf[:n] = tensor.reshape(-1)
    buf = buf.reshape(CHUNKS, E)
    held = [list(range(CHUNKS)) for _ in range(NUM_DEVICES)]
    for (name, step_groups), pg in zip(STEPS, groups):
        kind = dict(KINDS[name], name=name)
        new = list(held)
        for g in step_groups:
            for d, labels in held_after(kind, held, g).items():
                new[d] = labels
        if pg is not None:
            buf = call(kind, pg, next(g for g in step_groups if rank in g), held, buf)
        held = new
    tensor.copy_(buf.reshape(-1)[:n].reshape(tensor.shape))
    return tensor


def _rank_main(rank, port, nbytes, path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=NUM_DEVICES)
    groups, reduction = make_groups()
    x = torch.from_numpy(np.random.default_rng([0, rank]).integers(-1000, 1000, size=max(1, nbytes // 8)))
    want = x.clone()
    dist.all_reduce(want, group=reduction)   # torch's own sum over the reduction group
    dist.barrier()
    t0 = time.perf_counter()
    all_reduce(x, groups)
    elapsed = time.perf_counter() - t0
    got = [None] * NUM_DEVICES
    dist.all_gather_object(got, (bool(torch.equal(x, want)), elapsed))
    if rank == 0:
        with open(path, "w") as f:
            json.dump(got, f)
    dist.destroy_process_group()


def main():
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "result.json")
        mp.spawn(_rank_main, args=(port, nbytes, path), nprocs=NUM_DEVICES)
        with open(path) as f:
            got = json.load(f)
    bad = [d for d, (ok, _) in enumerate(got) if not ok]
    print(("verified: every rank holds torch's all_reduce over its reduction group" if not bad
           else f"WRONG on ranks {bad}"), file=sys.stderr)
    print(json.dumps({"verified": not bad, "ranks": NUM_DEVICES, "bad_ranks": bad,
                      "time_s": max(t for _, t in got)}))
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
'''


def torch_script(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], *, device_order: Any,
                 axis_names: Sequence[str], header: Sequence[str] = ()) -> str:
    """The text of a standalone ``python prog.py [BYTES]`` program performing ``program`` with torch collectives
    on ``NUM_DEVICES`` gloo processes, beside the placement's device mesh (``device_order``, ``axis_names``)."""
    text = mpi4py_script(program, reduction_groups, header=header)
    data = text[:text.index(_RUNTIME)]
    data = data.replace("Run:  mpiexec -n {0} python THIS_FILE.py [BYTES_PER_RANK]".format(program.num_devices),
                        "Run:  python THIS_FILE.py [BYTES_PER_RANK]   (starts {0} gloo processes)".format(
                            program.num_devices))
    data = data.replace("import json\nimport sys\n\nimport numpy as np\nfrom mpi4py import MPI\n",
                        "import json\nimport os\nimport socket\nimport sys\nimport tempfile\nimport time\n\n"
                        "import numpy as np\nimport torch\nimport torch.distributed as dist\n"
                        "import torch.multiprocessing as mp\n")
    data = data.replace("# how each collective behaves and which mpi4py method runs it",
                        "# how each collective behaves (method: its MPI name; call() runs the torch one)")
    mesh = (f"\n# the placement as a device mesh: DEVICE_ORDER[i0][i1]... is the rank at those axis coordinates\n"
            f"DEVICE_ORDER = {json.dumps(device_order)}\nAXIS_NAMES = {tuple(axis_names)!r}\n\n\n"
            "def device_mesh(device_type=\"cpu\"):\n"
            "    \"\"\"The torch DeviceMesh of the placement (after init_process_group).\"\"\"\n"
            "    from torch.distributed.device_mesh import DeviceMesh\n"
            "    return DeviceMesh(device_type, DEVICE_ORDER, mesh_dim_names=AXIS_NAMES)\n")
    return data.rstrip("\n") + "\n" + mesh + "\n" + _TORCH_RUNTIME
