"""The PMPI counter on the traffic pattern of a real LU code (COnfLUX by Kwasniewski et al. scatters panels with
MPI_Iscatterv, posts pivot-row receives at full row length while the message is shorter, and sends blocks to
itself), through mpi4py as a user's program would call it.  Every rank computes the bytes that crossed between
ranks from the sizes it chose (not from MPI), and prints them beside the counter's figures (rank 0 prints all
ranks as one JSON line)."""

import json

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime import pmpi

comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()
N = 96
truth = {"sent": 0, "received": 0, "self": 0}
before, self0 = pmpi.read(), pmpi.read_self()

# 1. panels scattered with MPI_Iscatterv from a rotating root, uneven counts
for root in range(n):
    counts = [(q + 1) * 10 + root for q in range(n)]
    displs = list(np.cumsum([0] + counts[:-1]))
    send = np.arange(sum(counts), dtype=np.float64) if me == root else None
    recv = np.empty(counts[me], dtype=np.float64)
    req = comm.Iscatterv([send, counts, displs, MPI.DOUBLE] if me == root else None, recv, root=root)
    req.Wait()
    if me == root:
        truth["sent"] += 8 * (sum(counts) - counts[me])
    else:
        truth["received"] += 8 * counts[me]

# 2. pivot rows: the owner of step k sends the row's trailing part (N - k elements) to every other rank, which
#    posted a receive of the whole row (N elements)
for k in range(0, N, 7):
    owner = k % n
    reqs = []
    row = np.full(N, float(k))
    if me == owner:
        for q in range(n):
            if q != owner:
                reqs.append(comm.Isend(row[k:], dest=q, tag=k))
                truth["sent"] += 8 * (N - k)
    else:
        buf = np.empty(N)
        reqs.append(comm.Irecv(buf, source=owner, tag=k))
        truth["received"] += 8 * (N - k)
    MPI.Request.Waitall(reqs)

# 3. blocks to itself (a local panel update routed through MPI)
for k in range(3):
    blk = np.ones(50 + k)
    out = np.empty(200)
    r = comm.Isend(blk, dest=me, tag=1000 + k)
    comm.Recv(out, source=me, tag=1000 + k)
    r.Wait()
    truth["self"] += 8 * (50 + k)

sent, received = pmpi.diff(before)
row = {"rank": me, "truth": truth, "counted": {"sent": sent, "received": received,
                                                "self": pmpi.read_self() - self0}}
rows = comm.gather(row, root=0)
if me == 0:
    print(json.dumps(rows))
