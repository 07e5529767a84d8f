/* meshplan's PMPI byte counter (exec/runtime/pmpi.py builds and loads it with LD_PRELOAD).
 *
 * Counts, per rank, the bytes the rank SENDS TO and RECEIVES FROM OTHER RANKS, and apart from them the bytes of
 * messages it sends TO ITSELF, independently of Python.  The wrappers of every point-to-point, collective
 * (blocking, nonblocking, persistent, v/w, neighborhood), partitioned and one-sided call, plain and MPI-4
 * large-count (_c), are GENERATED from the MPI library's own prototypes into pmpi_wrappers.c
 * (`python -m meshplan.exec.runtime.pmpi_gen`; the per-call rules are pmpi_gen.RULES and docs/runtime.md lists
 * them); this file holds the counters, the helpers the rules use and the calls written by hand:
 *   - a receive is counted by the size RECEIVED (MPI_Get_count(status, MPI_BYTE)) when it completes: blocking
 *     receives at return, nonblocking and persistent ones in the Wait/Test call that completes them (a request
 *     table keyed by the handle); a cancelled receive or one from MPI_PROC_NULL counts nothing;
 *   - a message a rank sends to itself counts as "self" at the sender, never as sent or received;
 *   - persistent requests (…_init) count their words at every MPI_Start/Startall;
 *   - MPI_Isendrecv(_replace) is posted as a receive and a send under a generalized request that the Wait/Test
 *     calls finish (MPICH's own request carries no receive status: see the pair section below);
 *   - a collective counts its "direct algorithm" words, what the data movement needs whatever algorithm the
 *     library picks (e.g. Reduce_scatter: receives (size-1) x its own block); intercommunicator collectives and
 *     collectives on one rank count nothing;
 *   - one-sided calls are counted at the origin (the target's CPU takes no part): Put/Accumulate as sent,
 *     Get as received, Get_accumulate/Fetch_and_op/Compare_and_swap both.
 * meshplan_pmpi_sent()/_received()/_self() read the counters (ctypes); at MPI_Finalize the counters are written
 * to $MESHPLAN_PMPI_DIR/rank<r>.txt ("sent received self") when that variable is set.
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
#include <string.h>

static long long g_sent = 0, g_recv = 0, g_self = 0;

long long meshplan_pmpi_sent(void) { return g_sent; }
long long meshplan_pmpi_received(void) { return g_recv; }
long long meshplan_pmpi_self(void) { return g_self; }
void meshplan_pmpi_reset(void) { g_sent = 0; g_recv = 0; g_self = 0; }
static void add3(long long s, long long r, long long x) { g_sent += s; g_recv += r; g_self += x; }

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


static long long ts(MPI_Datatype dt) {
    MPI_Count s = 0;
    if (dt == MPI_DATATYPE_NULL) return 0;
    PMPI_Type_size_c(dt, &s);
    return (long long)s;
}
/* this rank in an intracommunicator; -2 in an intercommunicator (a peer rank there names the remote group) */
static int me_in(MPI_Comm c) {
    int inter = 0, r = -2;
    if (c == MPI_COMM_NULL) return -2;
    PMPI_Comm_test_inter(c, &inter);
    if (inter) return -2;
    PMPI_Comm_rank(c, &r);
    return r;
}
/* an intracommunicator of two or more ranks: its size and this rank */
static int coll_ctx(MPI_Comm c, int *n, int *me) {
    *me = me_in(c);
    if (*me < 0) return 0;
    PMPI_Comm_size(c, n);
    return *n > 1;
}
#define COLL_CTX(c) int n_ = 0, me_ = 0; if (coll_ctx(c, &n_, &me_))
#define SUMX(a, n, me) ({ long long t_ = 0; for (int q_ = 0; q_ < (n); q_++) if (q_ != (me)) t_ += (long long)(a)[q_]; t_; })

/* the in- and out-neighbours of a process topology, in the order the neighborhood collectives use */
static int nbr_ctx(MPI_Comm c, int *me, int *nin, int **src, int *nout, int **dst) {
    int kind = MPI_UNDEFINED;
    *me = me_in(c);
    if (*me < 0) return 0;
    PMPI_Topo_test(c, &kind);
    if (kind == MPI_CART) {
        int nd = 0;
        PMPI_Cartdim_get(c, &nd);
        *src = malloc(sizeof(int) * (2 * nd + 1)); *dst = malloc(sizeof(int) * (2 * nd + 1));
        for (int d = 0; d < nd; d++) {
            int lo, hi;
            PMPI_Cart_shift(c, d, 1, &lo, &hi);
            (*src)[2 * d] = (*dst)[2 * d] = lo;
            (*src)[2 * d + 1] = (*dst)[2 * d + 1] = hi;
        }
        *nin = *nout = 2 * nd;
        return 1;
    }
    if (kind == MPI_GRAPH) {
        int k = 0;
        PMPI_Graph_neighbors_count(c, *me, &k);
        *src = malloc(sizeof(int) * (k + 1)); *dst = malloc(sizeof(int) * (k + 1));
        PMPI_Graph_neighbors(c, *me, k, *src);
        memcpy(*dst, *src, sizeof(int) * k);
        *nin = *nout = k;
        return 1;
    }
    if (kind == MPI_DIST_GRAPH) {
        int in = 0, out = 0, weighted = 0;
        PMPI_Dist_graph_neighbors_count(c, &in, &out, &weighted);
        *src = malloc(sizeof(int) * (in + 1)); *dst = malloc(sizeof(int) * (out + 1));
        int *sw = malloc(sizeof(int) * (in + 1)), *dw = malloc(sizeof(int) * (out + 1));
        PMPI_Dist_graph_neighbors(c, in, *src, sw, out, *dst, dw);
        free(sw); free(dw);
        *nin = in; *nout = out;
        return 1;
    }
    return 0;
}
#define NBR_CTX(c) int nin_ = 0, nout_ = 0, me_ = -2; int *src_ = NULL, *dst_ = NULL; \
    if (nbr_ctx(c, &me_, &nin_, &src_, &nout_, &dst_))
#define NBR_END free(src_); free(dst_);

/* a message of B bytes to DEST: to another rank (S) or to itself (X); nothing to MPI_PROC_NULL */
#define SEND1(comm, dest, B) { long long b_ = (B); \
    if ((dest) != MPI_PROC_NULL) { if ((dest) == me_in(comm)) X += b_; else S += b_; } }

/* this rank in a window's group */
static int win_me(MPI_Win w) {
    MPI_Group g; int r = -2;
    if (PMPI_Win_get_group(w, &g) != MPI_SUCCESS) return -2;
    PMPI_Group_rank(g, &r);
    PMPI_Group_free(&g);
    return r;
}
/* a one-sided call at the origin: SB bytes to the target, RB bytes from it (both "self" on its own window) */
#define RMA1(win, tgt, SB, RB) { if ((tgt) != MPI_PROC_NULL) { long long s_ = (SB), r_ = (RB); \
    if ((tgt) == win_me(win)) X += s_ + r_; else { S += s_; R += r_; } } }

/* a completed receive: the bytes it received (from another rank; from itself they were counted as self) */
static void count_recv(int me, const MPI_Status *st) {
    int cancelled = 0;
    MPI_Count n = 0;
    if (st->MPI_SOURCE == MPI_PROC_NULL || st->MPI_SOURCE == MPI_ANY_SOURCE) return;  /* nothing / empty status */
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) return;
    if (PMPI_Get_count_c(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n <= 0) return;
    if (st->MPI_SOURCE != me) g_recv += (long long)n;
}

/* ---- the request table: what a pending receive or a persistent request counts ---- */
enum { T_RECV = 1, T_FIXED = 2, T_PAIR = 3 };
typedef struct { long long key; unsigned char used, kind, persistent; int me; long long s, r, x; void *pair; } slot_t;
typedef struct { slot_t *v; size_t cap, count, fill; } table_t;
static table_t g_reqs, g_msgs;  /* pending requests; matched messages (Mprobe/Improbe) -> this rank */

static long long key_of(const void *handle, size_t size) {
    long long k = 0;
    memcpy(&k, handle, size < sizeof k ? size : sizeof k);
    return k;
}
static size_t slot_hash(long long k) {
    unsigned long long h = (unsigned long long)k;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33;
    return (size_t)h;
}
static slot_t *tab_find(table_t *t, long long k) {
    if (!t->count) return NULL;
    for (size_t m = t->cap - 1, i = slot_hash(k) & m; t->v[i].used; i = (i + 1) & m)
        if (t->v[i].used == 1 && t->v[i].key == k) return &t->v[i];
    return NULL;
}
static void tab_put(table_t *t, slot_t e);
static void tab_grow(table_t *t) {
    table_t old = *t;
    size_t cap = 64;
    while (cap < 4 * (old.count + 1)) cap *= 2;
    t->v = calloc(cap, sizeof(slot_t)); t->cap = cap; t->count = t->fill = 0;
    for (size_t i = 0; i < old.cap; i++) if (old.v[i].used == 1) tab_put(t, old.v[i]);
    free(old.v);
}
static void tab_put(table_t *t, slot_t e) {
    slot_t *hit = tab_find(t, e.key);
    if (hit) { *hit = e; hit->used = 1; return; }  /* a handle reused after a completion we did not see */
    if (2 * (t->fill + 1) > t->cap) tab_grow(t);
    size_t m = t->cap - 1, i = slot_hash(e.key) & m;
    while (t->v[i].used == 1) i = (i + 1) & m;
    if (!t->v[i].used) t->fill++;
    t->v[i] = e; t->v[i].used = 1; t->count++;
}
static void tab_del(table_t *t, slot_t *e) { e->used = 2; t->count--; }

static void track(MPI_Request req, int kind, int persistent, int me, long long s, long long r, long long x) {
    if (req == MPI_REQUEST_NULL) return;
    slot_t e = {key_of(&req, sizeof req), 1, (unsigned char)kind, (unsigned char)persistent, me, s, r, x, NULL};
    tab_put(&g_reqs, e);
}
static slot_t *req_find(MPI_Request req) { return tab_find(&g_reqs, key_of(&req, sizeof req)); }
/* request `key` completed with status `st` */
static void completed(long long key, const MPI_Status *st) {
    slot_t *e = tab_find(&g_reqs, key);
    if (!e) return;
    if (e->kind == T_RECV) count_recv(e->me, st);
    if (!e->persistent) tab_del(&g_reqs, e);
}

/* ---- MPI_Isendrecv(_replace) as a pair of requests ----
 * MPICH runs MPI_Isendrecv as a nonblocking schedule whose receive keeps no status, so the status of its request
 * does not say how much arrived (a test read 0 bytes now and then).  The wrappers below post the receive and the
 * send themselves (PMPI_Irecv, PMPI_Isend) and hand the caller a generalized request; the Wait/Test calls finish
 * the pair (wait or test both), count the receive by its own status, and complete the generalized request,
 * whose status is then the receive's (as the MPI standard defines it for MPI_Isendrecv). */
typedef struct { MPI_Request inner[2]; MPI_Status recv; void *tmp; int me, done; } pair_t;
static int pair_query(void *extra, MPI_Status *st) { *st = ((pair_t *)extra)->recv; st->MPI_ERROR = MPI_SUCCESS;
                                                      return MPI_SUCCESS; }
static int pair_free(void *extra) { pair_t *p = extra; free(p->tmp); free(p); return MPI_SUCCESS; }
static int pair_cancel(void *extra, int complete) {
    pair_t *p = extra;
    if (!complete) for (int i = 0; i < 2; i++) if (p->inner[i] != MPI_REQUEST_NULL) PMPI_Cancel(&p->inner[i]);
    return MPI_SUCCESS;
}
/* the pair behind `req` (NULL when `req` is no unfinished pair) */
static pair_t *pair_of(MPI_Request req) {
    slot_t *e = g_reqs.count ? req_find(req) : NULL;
    return e && e->kind == T_PAIR && !((pair_t *)e->pair)->done ? e->pair : NULL;
}
/* finish the pair of `greq` when both its requests are done (wait: block until they are) */
static void pair_advance(MPI_Request greq, int wait) {
    pair_t *p = pair_of(greq);
    if (!p) return;
    MPI_Status st[2];
    int flag = 1;
    if (wait) PMPI_Waitall(2, p->inner, st); else PMPI_Testall(2, p->inner, &flag, st);
    if (!flag) return;
    p->recv = st[0];
    count_recv(p->me, &st[0]);
    p->done = 1;
    PMPI_Grequest_complete(greq);
}
static void pairs_advance(int n, MPI_Request reqs[], int wait) {
    if (g_reqs.count) for (int i = 0; i < n; i++) pair_advance(reqs[i], wait);
}
static int pairs_pending(int n, const MPI_Request reqs[]) {
    for (int i = 0; i < n && g_reqs.count; i++) if (pair_of(reqs[i])) return 1;
    return 0;
}
/* start the pair: the receive, then the send of `sbuf` (for _replace: a packed copy, freed with the pair) */
static int pair_start(const void *sbuf, MPI_Count scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                      MPI_Count rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, void *tmp,
                      MPI_Request *request) {
    pair_t *p = calloc(1, sizeof *p);
    p->tmp = tmp; p->me = me_in(comm);
    int rc = PMPI_Irecv_c(rbuf, rcount, rtype, source, rtag, comm, &p->inner[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend_c(sbuf, scount, stype, dest, stag, comm, &p->inner[1]);
    if (rc == MPI_SUCCESS) rc = PMPI_Grequest_start(pair_query, pair_free, pair_cancel, p, request);
    if (rc != MPI_SUCCESS) { free(tmp); free(p); return rc; }
    slot_t e = {key_of(request, sizeof *request), 1, T_PAIR, 0, p->me, 0, 0, 0, p};
    tab_put(&g_reqs, e);
    return rc;
}
#define ISENDRECV(CT, COUNT_T) \
int MPI_Isendrecv##CT(const void *sendbuf, COUNT_T sendcount, MPI_Datatype sendtype, int dest, int sendtag, \
                      void *recvbuf, COUNT_T recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, \
                      MPI_Request *request) { \
    long long S = 0, X = 0; \
    SEND1(comm, dest, (long long)sendcount * ts(sendtype)); \
    int rc = pair_start(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, \
                        comm, NULL, request); \
    if (rc == MPI_SUCCESS) add3(S, 0, X); \
    return rc; } \
int MPI_Isendrecv_replace##CT(void *buf, COUNT_T count, MPI_Datatype datatype, int dest, int sendtag, int source, \
                              int recvtag, MPI_Comm comm, MPI_Request *request) { \
    long long S = 0, X = 0; \
    SEND1(comm, dest, (long long)count * ts(datatype)); \
    MPI_Count size = 0, pos = 0; \
    PMPI_Pack_size_c(count, datatype, comm, &size); \
    void *tmp = malloc(size > 0 ? size : 1); \
    int rc = PMPI_Pack_c(buf, count, datatype, tmp, size, &pos, comm); \
    if (rc != MPI_SUCCESS) { free(tmp); return rc; } \
    rc = pair_start(tmp, pos, MPI_PACKED, dest, sendtag, buf, count, datatype, source, recvtag, comm, tmp, request); \
    if (rc == MPI_SUCCESS) add3(S, 0, X); \
    return rc; }
ISENDRECV(, int)
ISENDRECV(_c, MPI_Count)

/* ---- completion: the Wait and Test families ---- */
int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    if (!g_reqs.count || !req_find(*request)) return PMPI_Wait(request, status);
    pair_advance(*request, 1);
    long long k = key_of(request, sizeof *request);
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    int rc = PMPI_Wait(request, status);
    if (rc == MPI_SUCCESS) completed(k, status);
    return rc;
}
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    if (!g_reqs.count || !req_find(*request)) return PMPI_Test(request, flag, status);
    pair_advance(*request, 0);
    long long k = key_of(request, sizeof *request);
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    int rc = PMPI_Test(request, flag, status);
    if (rc == MPI_SUCCESS && *flag) completed(k, status);
    return rc;
}
/* the tracked handles among n requests (NULL when none is tracked: the call passes straight through) */
static long long *saved_keys(int n, const MPI_Request reqs[]) {
    if (!g_reqs.count || n <= 0) return NULL;
    int any = 0;
    for (int i = 0; i < n && !any; i++) any = req_find(reqs[i]) != NULL;
    if (!any) return NULL;
    long long *keys = malloc(sizeof(long long) * n);
    for (int i = 0; i < n; i++) keys[i] = key_of(&reqs[i], sizeof reqs[i]);
    return keys;
}
int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    long long *keys = saved_keys(count, reqs);
    if (!keys) return PMPI_Waitall(count, reqs, statuses);
    pairs_advance(count, reqs, 1);
    MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? malloc(sizeof(MPI_Status) * count) : statuses;
    int rc = PMPI_Waitall(count, reqs, st);
    if (rc == MPI_SUCCESS) for (int i = 0; i < count; i++) completed(keys[i], &st[i]);
    if (st != statuses) free(st);
    free(keys);
    return rc;
}
int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    long long *keys = saved_keys(count, reqs);
    if (!keys) return PMPI_Testall(count, reqs, flag, statuses);
    pairs_advance(count, reqs, 0);
    MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? malloc(sizeof(MPI_Status) * count) : statuses;
    int rc = PMPI_Testall(count, reqs, flag, st);
    if (rc == MPI_SUCCESS && *flag) for (int i = 0; i < count; i++) completed(keys[i], &st[i]);
    if (st != statuses) free(st);
    free(keys);
    return rc;
}
int MPI_Waitany(int count, MPI_Request reqs[], int *indx, MPI_Status *status) {
    long long *keys = saved_keys(count, reqs);
    if (!keys) return PMPI_Waitany(count, reqs, indx, status);
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    int rc, flag = 0;
    if (pairs_pending(count, reqs)) {   /* a pair progresses only here: poll until a request completes */
        do { pairs_advance(count, reqs, 0); rc = PMPI_Testany(count, reqs, indx, &flag, status); }
        while (rc == MPI_SUCCESS && !flag);
    } else rc = PMPI_Waitany(count, reqs, indx, status);
    if (rc == MPI_SUCCESS && *indx != MPI_UNDEFINED) completed(keys[*indx], status);
    free(keys);
    return rc;
}
int MPI_Testany(int count, MPI_Request reqs[], int *indx, int *flag, MPI_Status *status) {
    long long *keys = saved_keys(count, reqs);
    if (!keys) return PMPI_Testany(count, reqs, indx, flag, status);
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    pairs_advance(count, reqs, 0);
    int rc = PMPI_Testany(count, reqs, indx, flag, status);
    if (rc == MPI_SUCCESS && *flag && *indx != MPI_UNDEFINED) completed(keys[*indx], status);
    free(keys);
    return rc;
}
#define SOME_BODY(CALL, WAIT) \
    long long *keys = saved_keys(incount, reqs); \
    if (!keys) return CALL; \
    statuses = statuses == MPI_STATUSES_IGNORE ? (own = malloc(sizeof(MPI_Status) * incount)) : statuses; \
    int rc, pending = pairs_pending(incount, reqs); \
    do { pairs_advance(incount, reqs, 0); \
         rc = WAIT && pending ? PMPI_Testsome(incount, reqs, outcount, indices, statuses) : CALL; } \
    while (WAIT && pending && rc == MPI_SUCCESS && *outcount == 0); \
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) \
        for (int k = 0; k < *outcount; k++) completed(keys[indices[k]], &statuses[k]); \
    free(own); free(keys); \
    return rc;
int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    MPI_Status *own = NULL;
    SOME_BODY(PMPI_Waitsome(incount, reqs, outcount, indices, statuses), 1)
}
int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    MPI_Status *own = NULL;
    SOME_BODY(PMPI_Testsome(incount, reqs, outcount, indices, statuses), 0)
}

/* ---- persistent requests: every start counts the words computed at init ---- */
static void started(MPI_Request req) {
    slot_t *e = req_find(req);
    if (e && e->kind == T_FIXED) add3(e->s, e->r, e->x);
}
int MPI_Start(MPI_Request *request) {
    int rc = PMPI_Start(request);
    if (rc == MPI_SUCCESS && g_reqs.count) started(*request);
    return rc;
}
int MPI_Startall(int count, MPI_Request reqs[]) {
    int rc = PMPI_Startall(count, reqs);
    if (rc == MPI_SUCCESS && g_reqs.count) for (int i = 0; i < count; i++) started(reqs[i]);
    return rc;
}
int MPI_Request_free(MPI_Request *request) {
    slot_t *e = g_reqs.count ? req_find(*request) : NULL;
    pair_t *p = pair_of(*request);
    if (p) {   /* its two requests finish on their own; the generalized request is completed to be freed */
        for (int i = 0; i < 2; i++) if (p->inner[i] != MPI_REQUEST_NULL) PMPI_Request_free(&p->inner[i]);
        p->tmp = NULL;   /* the send may still read a _replace copy: left allocated */
        p->done = 1;
        PMPI_Grequest_complete(*request);
    }
    if (e) tab_del(&g_reqs, e);  /* a freed pending receive is no longer seen: it counts nothing */
    return PMPI_Request_free(request);
}

/* ---- matched probes and receives ---- */
static void msg_put(MPI_Message m, int me) {
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
    slot_t e = {key_of(&m, sizeof m), 1, 0, 0, me, 0, 0, 0, NULL};
    tab_put(&g_msgs, e);
}
static int msg_take(MPI_Message m) {
    slot_t *e = tab_find(&g_msgs, key_of(&m, sizeof m));
    int me = e ? e->me : -2;
    if (e) tab_del(&g_msgs, e);
    return me;
}
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    int rc = PMPI_Mprobe(source, tag, comm, message, status);
    if (rc == MPI_SUCCESS) msg_put(*message, me_in(comm));
    return rc;
}
int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
    int rc = PMPI_Improbe(source, tag, comm, flag, message, status);
    if (rc == MPI_SUCCESS && *flag) msg_put(*message, me_in(comm));
    return rc;
}
#define MRECV(CT) \
int MPI_Mrecv##CT(void *buf, COUNT_T count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status) { \
    int me = msg_take(*message); MPI_Status own; \
    if (status == MPI_STATUS_IGNORE) status = &own; \
    int rc = PMPI_Mrecv##CT(buf, count, datatype, message, status); \
    if (rc == MPI_SUCCESS) count_recv(me, status); \
    return rc; } \
int MPI_Imrecv##CT(void *buf, COUNT_T count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request) { \
    int me = msg_take(*message); \
    int rc = PMPI_Imrecv##CT(buf, count, datatype, message, request); \
    if (rc == MPI_SUCCESS) track(*request, T_RECV, 0, me, 0, 0, 0); \
    return rc; }
#define COUNT_T int
MRECV()
#undef COUNT_T
#define COUNT_T MPI_Count
MRECV(_c)
#undef COUNT_T

#include "pmpi_wrappers.c"

int MPI_Finalize(void) {
    const char *dir = getenv("MESHPLAN_PMPI_DIR");
    if (dir && *dir) {
        char path[4096];
        int r = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &r);
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        FILE *f = fopen(path, "w");
        if (f) { fprintf(f, "%lld %lld %lld\n", g_sent, g_recv, g_self); fclose(f); }
    }
    return PMPI_Finalize();
}
