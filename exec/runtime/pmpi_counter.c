/* meshplan's PMPI byte counter (exec/runtime/pmpi.py builds and loads it with LD_PRELOAD).
 *
 * Counts, per rank, the bytes the rank RECEIVES FROM OTHER RANKS and the bytes it SENDS, independently of
 * Python: every wrapped MPI function adds to two counters and calls its PMPI_ twin.  Both the plain and the
 * MPI-4 large-count (_c) versions are wrapped (mpi4py 4 calls the _c ones).  Rules ("direct algorithm"
 * words, what the data movement needs whatever algorithm the library picks):
 *   Bcast               non-root receives count; root sends count
 *   Allgather(v), Iallgatherv   receives the other ranks' blocks; sends its own block
 *   Reduce_scatter(_block)  receives (size-1) x its own block; sends the other ranks' blocks
 *   Alltoallv           receives the other ranks' blocks; sends its blocks to the others
 *   Reduce              root receives (size-1) x count; others send count
 *   Allreduce           receives and sends (size-1) x count
 *   Send/Isend/Ssend/Issend/Rsend, Recv/Irecv, Sendrecv   the message (posted receive size)
 * meshplan_pmpi_sent()/meshplan_pmpi_received() read the counters (ctypes); at MPI_Finalize the counters are
 * written to $MESHPLAN_PMPI_DIR/rank<r>.txt when that variable is set.
 *
 * Handles: meshplan_pmpi_handles(out) fills out[0..5] with the communicators created (Comm_split, _split_type,
 * _dup, _idup, _create, _create_group, Cart_create) and freed (Comm_free), the datatypes committed
 * (Type_commit) and freed (Type_free), and the windows allocated (Win_allocate(_shared), Win_create) and freed
 * (Win_free), so a test can see that an object which is used many times creates nothing per use and frees
 * what it created.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long long g_sent = 0, g_recv = 0;

long long meshplan_pmpi_sent(void) { return g_sent; }
long long meshplan_pmpi_received(void) { return g_recv; }
void meshplan_pmpi_reset(void) { g_sent = 0; g_recv = 0; }

static long long g_handles[6];  /* comms created, comms freed, types committed, types freed, wins made, freed */
void meshplan_pmpi_handles(long long out[6]) { for (int i = 0; i < 6; i++) out[i] = g_handles[i]; }
#define MADE(I, CALL) { int rc_ = CALL; if (rc_ == MPI_SUCCESS) g_handles[I]++; return rc_; }
/* a split or create that leaves this rank outside every group returns MPI_COMM_NULL: nothing to free */
#define MADE_COMM(CALL) { int rc_ = CALL; if (rc_ == MPI_SUCCESS && *out != MPI_COMM_NULL) g_handles[0]++; \
                          return rc_; }

int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) MADE_COMM(PMPI_Comm_split(c, color, key, out))
int MPI_Comm_split_type(MPI_Comm c, int t, int key, MPI_Info info, MPI_Comm *out)
    MADE_COMM(PMPI_Comm_split_type(c, t, key, info, out))
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *out) MADE_COMM(PMPI_Comm_dup(c, out))
int MPI_Comm_idup(MPI_Comm c, MPI_Comm *out, MPI_Request *req) MADE_COMM(PMPI_Comm_idup(c, out, req))
int MPI_Comm_create(MPI_Comm c, MPI_Group g, MPI_Comm *out) MADE_COMM(PMPI_Comm_create(c, g, out))
int MPI_Comm_create_group(MPI_Comm c, MPI_Group g, int tag, MPI_Comm *out)
    MADE_COMM(PMPI_Comm_create_group(c, g, tag, out))
int MPI_Cart_create(MPI_Comm c, int nd, const int dims[], const int per[], int re, MPI_Comm *out)
    MADE_COMM(PMPI_Cart_create(c, nd, dims, per, re, out))
int MPI_Comm_free(MPI_Comm *c) MADE(1, PMPI_Comm_free(c))
int MPI_Type_commit(MPI_Datatype *t) MADE(2, PMPI_Type_commit(t))
int MPI_Type_free(MPI_Datatype *t) MADE(3, PMPI_Type_free(t))
int MPI_Win_allocate_shared(MPI_Aint size, int du, MPI_Info info, MPI_Comm c, void *base, MPI_Win *w)
    MADE(4, PMPI_Win_allocate_shared(size, du, info, c, base, w))
int MPI_Win_allocate(MPI_Aint size, int du, MPI_Info info, MPI_Comm c, void *base, MPI_Win *w)
    MADE(4, PMPI_Win_allocate(size, du, info, c, base, w))
int MPI_Win_create(void *base, MPI_Aint size, int du, MPI_Info info, MPI_Comm c, MPI_Win *w)
    MADE(4, PMPI_Win_create(base, size, du, info, c, w))
int MPI_Win_free(MPI_Win *w) MADE(5, PMPI_Win_free(w))

static long long tsize(MPI_Datatype dt) {
    int s = 0;
    if (dt == MPI_DATATYPE_NULL) return 0;
    PMPI_Type_size(dt, &s);
    return (long long)s;
}
static int crank(MPI_Comm c) { int r = 0; PMPI_Comm_rank(c, &r); return r; }
static int csize(MPI_Comm c) { int s = 1; PMPI_Comm_size(c, &s); return s; }

/* ---- collectives ---- */
#define BCAST_BODY(CNT) \
    long long b = (long long)(CNT) * tsize(dt); \
    if (crank(comm) == root) g_sent += b; else g_recv += b;

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    BCAST_BODY(count) return PMPI_Bcast(buf, count, dt, root, comm);
}
int MPI_Bcast_c(void *buf, MPI_Count count, MPI_Datatype dt, int root, MPI_Comm comm) {
    BCAST_BODY(count) return PMPI_Bcast_c(buf, count, dt, root, comm);
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype sdt, void *rb, int rc, MPI_Datatype rdt, MPI_Comm comm) {
    g_recv += (long long)(csize(comm) - 1) * rc * tsize(rdt);
    g_sent += (long long)rc * tsize(rdt);
    return PMPI_Allgather(sb, sc, sdt, rb, rc, rdt, comm);
}
int MPI_Allgather_c(const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, MPI_Count rc, MPI_Datatype rdt,
                    MPI_Comm comm) {
    g_recv += (long long)(csize(comm) - 1) * rc * tsize(rdt);
    g_sent += (long long)rc * tsize(rdt);
    return PMPI_Allgather_c(sb, sc, sdt, rb, rc, rdt, comm);
}

#define AGV_BODY \
    int n = csize(comm), me = crank(comm); long long tot = 0; \
    for (int q = 0; q < n; q++) tot += (long long)rc[q]; \
    g_recv += (tot - (long long)rc[me]) * tsize(rdt); \
    g_sent += (long long)rc[me] * tsize(rdt);

int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int displs[],
                   MPI_Datatype rdt, MPI_Comm comm) {
    AGV_BODY return PMPI_Allgatherv(sb, sc, sdt, rb, rc, displs, rdt, comm);
}
int MPI_Allgatherv_c(const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, const MPI_Count rc[],
                     const MPI_Aint displs[], MPI_Datatype rdt, MPI_Comm comm) {
    AGV_BODY return PMPI_Allgatherv_c(sb, sc, sdt, rb, rc, displs, rdt, comm);
}

int MPI_Iallgatherv(const void *sb, int sc, MPI_Datatype sdt, void *rb, const int rc[], const int displs[],
                    MPI_Datatype rdt, MPI_Comm comm, MPI_Request *req) {
    AGV_BODY return PMPI_Iallgatherv(sb, sc, sdt, rb, rc, displs, rdt, comm, req);
}
int MPI_Iallgatherv_c(const void *sb, MPI_Count sc, MPI_Datatype sdt, void *rb, const MPI_Count rc[],
                      const MPI_Aint displs[], MPI_Datatype rdt, MPI_Comm comm, MPI_Request *req) {
    AGV_BODY return PMPI_Iallgatherv_c(sb, sc, sdt, rb, rc, displs, rdt, comm, req);
}

#define RS_BODY \
    int n = csize(comm), me = crank(comm); long long tot = 0, sz = tsize(dt); \
    for (int q = 0; q < n; q++) tot += (long long)rc[q]; \
    g_recv += (long long)(n - 1) * rc[me] * sz; \
    g_sent += (tot - (long long)rc[me]) * sz;

int MPI_Reduce_scatter(const void *sb, void *rb, const int rc[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    RS_BODY return PMPI_Reduce_scatter(sb, rb, rc, dt, op, comm);
}
int MPI_Reduce_scatter_c(const void *sb, void *rb, const MPI_Count rc[], MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm) {
    RS_BODY return PMPI_Reduce_scatter_c(sb, rb, rc, dt, op, comm);
}

/* every member sends and receives (n-1) blocks of rc elements */
#define RSB_BODY \
    long long b = (long long)(csize(comm) - 1) * rc * tsize(dt); g_recv += b; g_sent += b;

int MPI_Reduce_scatter_block(const void *sb, void *rb, int rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    RSB_BODY
    return PMPI_Reduce_scatter_block(sb, rb, rc, dt, op, comm);
}
int MPI_Reduce_scatter_block_c(const void *sb, void *rb, MPI_Count rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    RSB_BODY
    return PMPI_Reduce_scatter_block_c(sb, rb, rc, dt, op, comm);
}

#define A2AV_BODY \
    int n = csize(comm), me = crank(comm); long long rt = 0, st = 0; \
    for (int q = 0; q < n; q++) { rt += (long long)rc[q]; st += (long long)sc[q]; } \
    g_recv += (rt - (long long)rc[me]) * tsize(rdt); \
    g_sent += (st - (long long)sc[me]) * tsize(sdt);

int MPI_Alltoallv(const void *sb, const int sc[], const int sd[], MPI_Datatype sdt, void *rb, const int rc[],
                  const int rd[], MPI_Datatype rdt, MPI_Comm comm) {
    A2AV_BODY return PMPI_Alltoallv(sb, sc, sd, sdt, rb, rc, rd, rdt, comm);
}
int MPI_Alltoallv_c(const void *sb, const MPI_Count sc[], const MPI_Aint sd[], MPI_Datatype sdt, void *rb,
                    const MPI_Count rc[], const MPI_Aint rd[], MPI_Datatype rdt, MPI_Comm comm) {
    A2AV_BODY return PMPI_Alltoallv_c(sb, sc, sd, sdt, rb, rc, rd, rdt, comm);
}

/* the root receives (n-1) contributions, every other member sends its own */
#define REDUCE_BODY \
    long long b = (long long)count * tsize(dt); \
    if (crank(comm) == root) g_recv += (long long)(csize(comm) - 1) * b; else g_sent += b;

int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
    REDUCE_BODY
    return PMPI_Reduce(sb, rb, count, dt, op, root, comm);
}
int MPI_Reduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
    REDUCE_BODY
    return PMPI_Reduce_c(sb, rb, count, dt, op, root, comm);
}

/* a bandwidth-optimal AllReduce moves (n-1) buffers' worth in and out of every member */
#define AR_BODY \
    long long b = (long long)(csize(comm) - 1) * count * tsize(dt); g_recv += b; g_sent += b;

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    AR_BODY
    return PMPI_Allreduce(sb, rb, count, dt, op, comm);
}
int MPI_Allreduce_c(const void *sb, void *rb, MPI_Count count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    AR_BODY
    return PMPI_Allreduce_c(sb, rb, count, dt, op, comm);
}

/* ---- point to point ---- */
#define SEND_WRAP(NAME, CT) \
int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) { \
    if (dest != MPI_PROC_NULL) g_sent += (long long)count * tsize(dt); \
    return PMPI_##NAME(buf, count, dt, dest, tag, comm); }
#define ISEND_WRAP(NAME, CT) \
int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req) { \
    if (dest != MPI_PROC_NULL) g_sent += (long long)count * tsize(dt); \
    return PMPI_##NAME(buf, count, dt, dest, tag, comm, req); }

SEND_WRAP(Send, int)
SEND_WRAP(Send_c, MPI_Count)
SEND_WRAP(Ssend, int)
SEND_WRAP(Ssend_c, MPI_Count)
SEND_WRAP(Rsend, int)
SEND_WRAP(Rsend_c, MPI_Count)
ISEND_WRAP(Isend, int)
ISEND_WRAP(Isend_c, MPI_Count)
ISEND_WRAP(Issend, int)
ISEND_WRAP(Issend_c, MPI_Count)

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    if (src != MPI_PROC_NULL) g_recv += (long long)count * tsize(dt);
    return PMPI_Recv(buf, count, dt, src, tag, comm, st);
}
int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    if (src != MPI_PROC_NULL) g_recv += (long long)count * tsize(dt);
    return PMPI_Recv_c(buf, count, dt, src, tag, comm, st);
}
int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    if (src != MPI_PROC_NULL) g_recv += (long long)count * tsize(dt);
    return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
}
int MPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    if (src != MPI_PROC_NULL) g_recv += (long long)count * tsize(dt);
    return PMPI_Irecv_c(buf, count, dt, src, tag, comm, req);
}
int MPI_Sendrecv(const void *sb, int sc, MPI_Datatype sdt, int dest, int stag, void *rb, int rc, MPI_Datatype rdt,
                 int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    if (dest != MPI_PROC_NULL) g_sent += (long long)sc * tsize(sdt);
    if (src != MPI_PROC_NULL) g_recv += (long long)rc * tsize(rdt);
    return PMPI_Sendrecv(sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm, st);
}
int MPI_Sendrecv_c(const void *sb, MPI_Count sc, MPI_Datatype sdt, int dest, int stag, void *rb, MPI_Count rc,
                   MPI_Datatype rdt, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    if (dest != MPI_PROC_NULL) g_sent += (long long)sc * tsize(sdt);
    if (src != MPI_PROC_NULL) g_recv += (long long)rc * tsize(rdt);
    return PMPI_Sendrecv_c(sb, sc, sdt, dest, stag, rb, rc, rdt, src, rtag, comm, st);
}

int MPI_Finalize(void) {
    const char *dir = getenv("MESHPLAN_PMPI_DIR");
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, crank(MPI_COMM_WORLD));
        FILE *f = fopen(path, "w");
        if (f) { fprintf(f, "%lld %lld\n", g_sent, g_recv); fclose(f); }
    }
    return PMPI_Finalize();
}
