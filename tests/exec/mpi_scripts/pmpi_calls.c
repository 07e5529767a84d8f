/* Every call the PMPI counter wraps, with known sizes, on 4 ranks (tests/exec/test_runtime.py builds and runs it
 * with the counter preloaded).  Each check prints one line
 *     <call> <rank> <sent> <received> <self> <want sent> <want received> <want self>
 * with what the counter added during the call (and its completion) and what the rule in docs/runtime.md says.
 * Receives are posted larger than the message (the counter must charge the size received), and the neighbourhood,
 * point-to-point and one-sided parts each include a message to the rank itself (counted as "self" only). */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long (*f_s)(void), (*f_r)(void), (*f_x)(void);
static int me, n;

static void report(const char *name, long long s, long long r, long long x, long long ws, long long wr,
                   long long wx) {
    printf("%s %d %lld %lld %lld %lld %lld %lld\n", name, me, s, r, x, ws, wr, wx);
    fflush(stdout);
}
#define CHECK(NAME, WS, WR, WX, ...) { \
    long long s0_ = f_s(), r0_ = f_r(), x0_ = f_x(); \
    { __VA_ARGS__; } \
    report(NAME, f_s() - s0_, f_r() - r0_, f_x() - x0_, (WS), (WR), (WX)); \
    PMPI_Barrier(MPI_COMM_WORLD); }

#define C 3                    /* elements per block */
#define B ((long long)sizeof(double))
#define BIG 256
static double sbuf[BIG], rbuf[BIG], buf2[BIG], win_mem[BIG];
static int cnt[4], dsp[4], wdsp[4], ucnt[4];  /* cnt[q] = q + 1; ucnt: C to every rank */
static MPI_Count ccnt[4], cucnt[4];
static MPI_Aint adsp[4], awdsp[4];
static MPI_Datatype wt[4];

/* blocking, nonblocking (+Wait) and persistent (2 x Start+Wait) forms of one collective */
#define COLL3(NAME, INAME, SFX, WS, WR, ...) XCOLL3(NAME, INAME, SFX, WS, WR, 0, __VA_ARGS__)
#define XCOLL3(NAME, INAME, SFX, WS, WR, WX, ...) \
    CHECK("MPI_" #NAME #SFX, WS, WR, WX, MPI_##NAME##SFX(__VA_ARGS__)) \
    CHECK("MPI_" #INAME #SFX, WS, WR, WX, MPI_Request q_; MPI_##INAME##SFX(__VA_ARGS__, &q_); \
          MPI_Wait(&q_, MPI_STATUS_IGNORE)) \
    CHECK("MPI_" #NAME "_init" #SFX, 2 * (WS), 2 * (WR), 2 * (WX), MPI_Request q_; \
          MPI_##NAME##_init##SFX(__VA_ARGS__, MPI_INFO_NULL, &q_); \
          for (int k_ = 0; k_ < 2; k_++) { MPI_Start(&q_); MPI_Wait(&q_, MPI_STATUS_IGNORE); } \
          MPI_Request_free(&q_))

#define SUMX_CNT(me) (10 - ((me) + 1))  /* sum of q + 1 over the other ranks q */

#define ALL_COLLECTIVES(SFX, CNT, DSP, WDSP) { \
    MPI_Comm w = MPI_COMM_WORLD; int root = 0, R0 = me == root; \
    COLL3(Bcast, Ibcast, SFX, R0 ? C * B : 0, R0 ? 0 : C * B, sbuf, C, MPI_DOUBLE, root, w) \
    COLL3(Gather, Igather, SFX, R0 ? 0 : C * B, R0 ? (n - 1) * C * B : 0, sbuf, C, MPI_DOUBLE, rbuf, C, \
          MPI_DOUBLE, root, w) \
    COLL3(Gatherv, Igatherv, SFX, R0 ? 0 : (me + 1) * B, R0 ? SUMX_CNT(0) * B : 0, sbuf, me + 1, MPI_DOUBLE, \
          rbuf, CNT, DSP, MPI_DOUBLE, root, w) \
    COLL3(Scatter, Iscatter, SFX, R0 ? (n - 1) * C * B : 0, R0 ? 0 : C * B, sbuf, C, MPI_DOUBLE, rbuf, C, \
          MPI_DOUBLE, root, w) \
    COLL3(Scatterv, Iscatterv, SFX, R0 ? SUMX_CNT(0) * B : 0, R0 ? 0 : (me + 1) * B, sbuf, CNT, DSP, \
          MPI_DOUBLE, rbuf, me + 1, MPI_DOUBLE, root, w) \
    COLL3(Allgather, Iallgather, SFX, C * B, (n - 1) * C * B, sbuf, C, MPI_DOUBLE, rbuf, C, MPI_DOUBLE, w) \
    COLL3(Allgatherv, Iallgatherv, SFX, (me + 1) * B, SUMX_CNT(me) * B, sbuf, me + 1, MPI_DOUBLE, rbuf, CNT, \
          DSP, MPI_DOUBLE, w) \
    COLL3(Alltoall, Ialltoall, SFX, (n - 1) * C * B, (n - 1) * C * B, sbuf, C, MPI_DOUBLE, rbuf, C, \
          MPI_DOUBLE, w) \
    COLL3(Alltoallv, Ialltoallv, SFX, (n - 1) * C * B, (n - 1) * C * B, sbuf, U##CNT, UDSP##DSP, MPI_DOUBLE, \
          rbuf, U##CNT, UDSP##DSP, MPI_DOUBLE, w) \
    COLL3(Alltoallw, Ialltoallw, SFX, (n - 1) * C * B, (n - 1) * C * B, sbuf, U##CNT, WDSP, wt, rbuf, \
          U##CNT, WDSP, wt, w) \
    COLL3(Reduce, Ireduce, SFX, R0 ? 0 : C * B, R0 ? (n - 1) * C * B : 0, sbuf, rbuf, C, MPI_DOUBLE, MPI_SUM, \
          root, w) \
    COLL3(Allreduce, Iallreduce, SFX, (n - 1) * C * B, (n - 1) * C * B, sbuf, rbuf, C, MPI_DOUBLE, MPI_SUM, w) \
    COLL3(Reduce_scatter, Ireduce_scatter, SFX, SUMX_CNT(me) * B, (n - 1) * (me + 1) * B, sbuf, rbuf, CNT, \
          MPI_DOUBLE, MPI_SUM, w) \
    COLL3(Reduce_scatter_block, Ireduce_scatter_block, SFX, (n - 1) * C * B, (n - 1) * C * B, sbuf, rbuf, C, \
          MPI_DOUBLE, MPI_SUM, w) \
    COLL3(Scan, Iscan, SFX, (n - 1 - me) * C * B, me * C * B, sbuf, rbuf, C, MPI_DOUBLE, MPI_SUM, w) \
    COLL3(Exscan, Iexscan, SFX, (n - 1 - me) * C * B, me * C * B, sbuf, rbuf, C, MPI_DOUBLE, MPI_SUM, w) \
}
/* Alltoallv with C to every rank: the U-prefixed arrays */
#define Ucnt ucnt
#define Uccnt cucnt
#define UDSPdsp dsp
#define UDSPadsp adsp

/* neighbourhood collectives on a distributed graph: in-edges from itself and from me+1, out-edges to itself and
 * to me-1 -> one block received from another rank, one sent to another, one to itself */
#define ALL_NEIGHBOR(SFX, CNT, DSP, ADSP) { \
    XCOLL3(Neighbor_allgather, Ineighbor_allgather, SFX, C * B, C * B, C * B, sbuf, C, MPI_DOUBLE, rbuf, C, MPI_DOUBLE, g) \
    XCOLL3(Neighbor_allgatherv, Ineighbor_allgatherv, SFX, C * B, C * B, C * B, sbuf, C, MPI_DOUBLE, rbuf, CNT, DSP, \
          MPI_DOUBLE, g) \
    XCOLL3(Neighbor_alltoall, Ineighbor_alltoall, SFX, C * B, C * B, C * B, sbuf, C, MPI_DOUBLE, rbuf, C, MPI_DOUBLE, g) \
    XCOLL3(Neighbor_alltoallv, Ineighbor_alltoallv, SFX, C * B, C * B, C * B, sbuf, CNT, DSP, MPI_DOUBLE, rbuf, CNT, \
          DSP, MPI_DOUBLE, g) \
    XCOLL3(Neighbor_alltoallw, Ineighbor_alltoallw, SFX, C * B, C * B, C * B, sbuf, CNT, ADSP, wt, rbuf, CNT, ADSP, \
          wt, g) \
}

/* point to point with the partner me^1: the even rank sends C, the odd one receives into BIG (oversized) */
#define PAIR(NAME, SFX, SEND_STMT) { \
    int peer = me ^ 1; MPI_Comm w = MPI_COMM_WORLD; (void)peer; (void)w; \
    if (me % 2 == 0) CHECK(NAME #SFX, C * B, 0, 0, SEND_STMT) \
    else CHECK("MPI_Recv" #SFX, 0, C * B, 0, MPI_Recv##SFX(rbuf, BIG, MPI_DOUBLE, peer, 7, w, MPI_STATUS_IGNORE)) }

#define ALL_P2P(SFX) { \
    int peer = me ^ 1, even = me % 2 == 0; MPI_Comm w = MPI_COMM_WORLD; MPI_Request q; MPI_Status st; \
    PAIR("MPI_Send", SFX, MPI_Send##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w)) \
    PAIR("MPI_Ssend", SFX, MPI_Ssend##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w)) \
    PAIR("MPI_Bsend", SFX, MPI_Bsend##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w)) \
    PAIR("MPI_Isend", SFX, MPI_Isend##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w, &q); MPI_Wait(&q, &st)) \
    PAIR("MPI_Issend", SFX, MPI_Issend##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w, &q); MPI_Wait(&q, &st)) \
    PAIR("MPI_Ibsend", SFX, MPI_Ibsend##SFX(sbuf, C, MPI_DOUBLE, peer, 7, w, &q); MPI_Wait(&q, &st)) \
    /* ready sends: the receive is posted (oversized) before the barrier */ \
    if (even) CHECK("MPI_Rsend" #SFX, C * B, 0, 0, PMPI_Barrier(w); MPI_Rsend##SFX(sbuf, C, MPI_DOUBLE, peer, 8, w)) \
    else CHECK("MPI_Irecv" #SFX, 0, C * B, 0, MPI_Irecv##SFX(rbuf, BIG, MPI_DOUBLE, peer, 8, w, &q); \
               PMPI_Barrier(w); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    if (even) CHECK("MPI_Irsend" #SFX, C * B, 0, 0, PMPI_Barrier(w); \
                    MPI_Irsend##SFX(sbuf, C, MPI_DOUBLE, peer, 8, w, &q); MPI_Wait(&q, &st)) \
    else CHECK("MPI_Irecv" #SFX, 0, C * B, 0, MPI_Irecv##SFX(rbuf, BIG, MPI_DOUBLE, peer, 8, w, &q); \
               PMPI_Barrier(w); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    /* persistent sends and receives, started twice each */ \
    PERSIST("MPI_Send_init", SFX, MPI_Send_init##SFX) \
    PERSIST("MPI_Ssend_init", SFX, MPI_Ssend_init##SFX) \
    PERSIST("MPI_Bsend_init", SFX, MPI_Bsend_init##SFX) \
    if (even) CHECK("MPI_Rsend_init" #SFX, 2 * C * B, 0, 0, \
                    MPI_Rsend_init##SFX(sbuf, C, MPI_DOUBLE, peer, 9, w, &q); \
                    for (int k = 0; k < 2; k++) { PMPI_Barrier(w); MPI_Start(&q); MPI_Wait(&q, &st); } \
                    MPI_Request_free(&q)) \
    else CHECK("MPI_Recv_init" #SFX, 0, 2 * C * B, 0, MPI_Recv_init##SFX(rbuf, BIG, MPI_DOUBLE, peer, 9, w, &q); \
               for (int k = 0; k < 2; k++) { MPI_Start(&q); PMPI_Barrier(w); MPI_Wait(&q, &st); } \
               MPI_Request_free(&q)) \
    /* exchanges with the partner: C out, received into an oversized buffer */ \
    CHECK("MPI_Sendrecv" #SFX, C * B, C * B, 0, MPI_Sendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, \
          MPI_DOUBLE, peer, 3, w, &st)) \
    CHECK("MPI_Sendrecv_replace" #SFX, C * B, C * B, 0, MPI_Sendrecv_replace##SFX(buf2, C, MPI_DOUBLE, peer, 3, \
          peer, 3, w, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Isendrecv" #SFX, C * B, C * B, 0, MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, \
          MPI_DOUBLE, peer, 3, w, &q); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Isendrecv_replace" #SFX, C * B, C * B, 0, MPI_Isendrecv_replace##SFX(buf2, C, MPI_DOUBLE, peer, \
          3, peer, 3, w, &q); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    /* the same completed by every other Wait/Test call, and the status the caller gets: the receive's */ \
    CHECK("MPI_Isendrecv" #SFX, C * B, C * B, 0, int f_ = 0; MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, \
          rbuf, BIG, MPI_DOUBLE, peer, 3, w, &q); while (!f_) MPI_Test(&q, &f_, &st)) \
    { int got_ = -1; MPI_Get_count(&st, MPI_DOUBLE, &got_); \
      report("MPI_Isendrecv_status" #SFX, got_, st.MPI_SOURCE, st.MPI_TAG, C, peer, 3); } \
    { for (int k_ = 0; k_ < C; k_++) buf2[k_] = 10 * me + k_;   /* _replace swaps the partners' data */ \
      MPI_Isendrecv_replace##SFX(buf2, C, MPI_DOUBLE, peer, 5, peer, 5, w, &q); MPI_Wait(&q, &st); \
      long long ok_ = 1; for (int k_ = 0; k_ < C; k_++) ok_ &= buf2[k_] == 10 * peer + k_; \
      report("MPI_Isendrecv_replace_data" #SFX, ok_, 0, 0, 1, 0, 0); } \
    CHECK("MPI_Isendrecv" #SFX, 2 * C * B, 2 * C * B, 0, MPI_Request q2_[3]; \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, MPI_DOUBLE, peer, 3, w, &q2_[0]); \
          q2_[1] = MPI_REQUEST_NULL; \
          MPI_Isendrecv_replace##SFX(buf2, C, MPI_DOUBLE, peer, 4, peer, 4, w, &q2_[2]); \
          MPI_Waitall(3, q2_, MPI_STATUSES_IGNORE)) \
    CHECK("MPI_Isendrecv" #SFX, 2 * C * B, 2 * C * B, 0, MPI_Request q2_[2]; int i_ = 0, k_ = 0, f_ = 0; \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, MPI_DOUBLE, peer, 3, w, &q2_[0]); \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 4, rbuf + BIG / 2, C, MPI_DOUBLE, peer, 4, w, &q2_[1]); \
          MPI_Waitany(2, q2_, &i_, &st); \
          do MPI_Testany(2, q2_, &k_, &f_, &st); while (!f_)) \
    CHECK("MPI_Isendrecv" #SFX, 2 * C * B, 2 * C * B, 0, MPI_Request q2_[2]; int o_ = 0, d_ = 0, ix_[2]; \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, MPI_DOUBLE, peer, 3, w, &q2_[0]); \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 4, rbuf + BIG / 2, C, MPI_DOUBLE, peer, 4, w, &q2_[1]); \
          while (d_ < 2) { MPI_Waitsome(2, q2_, &o_, ix_, MPI_STATUSES_IGNORE); d_ += o_; }) \
    CHECK("MPI_Isendrecv" #SFX, C * B, C * B, 0, int o_ = 0, ix_[1], f_ = 0; \
          MPI_Isendrecv##SFX(sbuf, C, MPI_DOUBLE, peer, 3, rbuf, BIG, MPI_DOUBLE, peer, 3, w, &q); \
          while (!f_) { MPI_Testsome(1, &q, &o_, ix_, MPI_STATUSES_IGNORE); f_ = o_ > 0; \
                        if (!f_) MPI_Testall(1, &q, &f_, MPI_STATUSES_IGNORE); }) \
    /* messages to itself: self only */ \
    CHECK("MPI_Isend" #SFX, 0, 0, C * B, MPI_Isend##SFX(sbuf, C, MPI_DOUBLE, me, 4, w, &q); \
          MPI_Recv##SFX(rbuf, BIG, MPI_DOUBLE, me, 4, w, MPI_STATUS_IGNORE); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Sendrecv" #SFX, 0, 0, C * B, MPI_Sendrecv##SFX(sbuf, C, MPI_DOUBLE, me, 5, rbuf, BIG, MPI_DOUBLE, \
          me, 5, w, MPI_STATUS_IGNORE)) \
    /* MPI_PROC_NULL: nothing */ \
    CHECK("MPI_Send" #SFX, 0, 0, 0, MPI_Send##SFX(sbuf, C, MPI_DOUBLE, MPI_PROC_NULL, 4, w)) \
    CHECK("MPI_Recv" #SFX, 0, 0, 0, MPI_Recv##SFX(rbuf, BIG, MPI_DOUBLE, MPI_PROC_NULL, 4, w, &st)) \
    /* matched probes */ \
    if (even) CHECK("MPI_Send" #SFX, C * B, 0, 0, MPI_Send##SFX(sbuf, C, MPI_DOUBLE, peer, 6, w)) \
    else CHECK("MPI_Mrecv" #SFX, 0, C * B, 0, MPI_Message m; MPI_Mprobe(peer, 6, w, &m, &st); \
               MPI_Mrecv##SFX(rbuf, BIG, MPI_DOUBLE, &m, MPI_STATUS_IGNORE)) \
    if (even) CHECK("MPI_Send" #SFX, C * B, 0, 0, MPI_Send##SFX(sbuf, C, MPI_DOUBLE, peer, 6, w)) \
    else CHECK("MPI_Imrecv" #SFX, 0, C * B, 0, MPI_Message m; int f = 0; \
               while (!f) MPI_Improbe(peer, 6, w, &f, &m, &st); \
               MPI_Imrecv##SFX(rbuf, BIG, MPI_DOUBLE, &m, &q); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
}
#define PERSIST(NAME, SFX, INIT) \
    if (even) CHECK(NAME #SFX, 2 * C * B, 0, 0, INIT(sbuf, C, MPI_DOUBLE, peer, 9, w, &q); \
                    for (int k = 0; k < 2; k++) { MPI_Start(&q); MPI_Wait(&q, &st); } MPI_Request_free(&q)) \
    else CHECK("MPI_Recv_init" #SFX, 0, 2 * C * B, 0, MPI_Recv_init##SFX(rbuf, BIG, MPI_DOUBLE, peer, 9, w, &q); \
               for (int k = 0; k < 2; k++) { MPI_Start(&q); MPI_Wait(&q, &st); } MPI_Request_free(&q))

/* the completion calls: four receives from the partner (oversized), completed by each Wait/Test form */
static void completions(void) {
    int peer = me ^ 1;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request q[4];
    MPI_Status st[4];
    const char *names[] = {"MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Testall", "MPI_Testany",
                           "MPI_Testsome", "MPI_Test", "MPI_Startall"};
    for (int form = 0; form < 8; form++) {
        long long s0 = f_s(), r0 = f_r(), x0 = f_x();
        int persistent = form == 7;
        for (int i = 0; i < 4; i++) {
            if (persistent) MPI_Recv_init(rbuf + 64 * i, 64, MPI_DOUBLE, peer, 20 + i, w, &q[i]);
            else MPI_Irecv(rbuf + 64 * i, 64, MPI_DOUBLE, peer, 20 + i, w, &q[i]);
        }
        if (persistent) MPI_Startall(4, q);
        for (int i = 0; i < 4; i++) MPI_Send(sbuf, C, MPI_DOUBLE, peer, 20 + i, w);  /* eager: C is small */
        int left = 4, flag = 0, idx, out, ids[4];
        switch (form) {
        case 0: case 7: MPI_Waitall(4, q, form == 0 ? MPI_STATUSES_IGNORE : st); break;
        case 1: while (left--) MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE); break;
        case 2: while (left > 0) { MPI_Waitsome(4, q, &out, ids, st); left -= out; } break;
        case 3: while (!flag) MPI_Testall(4, q, &flag, st); break;
        case 4: while (left > 0) { MPI_Testany(4, q, &idx, &flag, MPI_STATUS_IGNORE); if (flag) left--; } break;
        case 5: while (left > 0) { MPI_Testsome(4, q, &out, ids, MPI_STATUSES_IGNORE); left -= out; } break;
        case 6: for (int i = 0; i < 4; i++) { flag = 0; while (!flag) MPI_Test(&q[i], &flag, MPI_STATUS_IGNORE); } break;
        }
        if (persistent) for (int i = 0; i < 4; i++) MPI_Request_free(&q[i]);
        report(names[form], f_s() - s0, f_r() - r0, f_x() - x0, 4 * C * B, 4 * C * B, 0);
        PMPI_Barrier(w);
    }
    /* a cancelled receive counts nothing */
    CHECK("MPI_Cancel", 0, 0, 0, MPI_Irecv(rbuf, BIG, MPI_DOUBLE, peer, 99, w, &q[0]); MPI_Cancel(&q[0]);
          MPI_Wait(&q[0], MPI_STATUS_IGNORE))
    /* partitioned: 2 partitions of C elements */
    if (me % 2 == 0) CHECK("MPI_Psend_init", 2 * C * B, 0, 0, MPI_Psend_init(sbuf, 2, C, MPI_DOUBLE, peer, 11, w,
                           MPI_INFO_NULL, &q[0]); MPI_Start(&q[0]); MPI_Pready(0, q[0]); MPI_Pready(1, q[0]);
                           MPI_Wait(&q[0], MPI_STATUS_IGNORE); MPI_Request_free(&q[0]))
    else CHECK("MPI_Precv_init", 0, 2 * C * B, 0, MPI_Precv_init(rbuf, 2, C, MPI_DOUBLE, peer, 11, w,
               MPI_INFO_NULL, &q[0]); MPI_Start(&q[0]); MPI_Wait(&q[0], MPI_STATUS_IGNORE); MPI_Request_free(&q[0]))
}

/* one-sided, in a passive-target epoch on every rank: to the partner, and to itself (self) */
#define RMA_ORIGIN(SFX) { \
    int t = me ^ 1; \
    CHECK("MPI_Put" #SFX, C * B, 0, 0, MPI_Put##SFX(sbuf, C, MPI_DOUBLE, t, 0, C, MPI_DOUBLE, win); \
          MPI_Win_flush(t, win)) \
    CHECK("MPI_Put" #SFX, 0, 0, C * B, MPI_Put##SFX(sbuf, C, MPI_DOUBLE, me, 8, C, MPI_DOUBLE, win); \
          MPI_Win_flush(me, win)) \
    CHECK("MPI_Get" #SFX, 0, C * B, 0, MPI_Get##SFX(rbuf, C, MPI_DOUBLE, t, 0, C, MPI_DOUBLE, win); \
          MPI_Win_flush(t, win)) \
    CHECK("MPI_Accumulate" #SFX, C * B, 0, 0, MPI_Accumulate##SFX(sbuf, C, MPI_DOUBLE, t, 16, C, MPI_DOUBLE, \
          MPI_SUM, win); MPI_Win_flush(t, win)) \
    CHECK("MPI_Get_accumulate" #SFX, C * B, C * B, 0, MPI_Get_accumulate##SFX(sbuf, C, MPI_DOUBLE, rbuf, \
          C, MPI_DOUBLE, t, 24, C, MPI_DOUBLE, MPI_SUM, win); MPI_Win_flush(t, win)) \
    CHECK("MPI_Get_accumulate" #SFX, 0, C * B, 0, MPI_Get_accumulate##SFX(sbuf, C, MPI_DOUBLE, rbuf, C, \
          MPI_DOUBLE, t, 24, C, MPI_DOUBLE, MPI_NO_OP, win); MPI_Win_flush(t, win)) \
    MPI_Request q; \
    CHECK("MPI_Rput" #SFX, C * B, 0, 0, MPI_Rput##SFX(sbuf, C, MPI_DOUBLE, t, 0, C, MPI_DOUBLE, win, &q); \
          MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Rget" #SFX, 0, C * B, 0, MPI_Rget##SFX(rbuf, C, MPI_DOUBLE, t, 0, C, MPI_DOUBLE, win, &q); \
          MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Raccumulate" #SFX, C * B, 0, 0, MPI_Raccumulate##SFX(sbuf, C, MPI_DOUBLE, t, 16, C, MPI_DOUBLE, \
          MPI_SUM, win, &q); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
    CHECK("MPI_Rget_accumulate" #SFX, C * B, C * B, 0, MPI_Rget_accumulate##SFX(sbuf, C, MPI_DOUBLE, rbuf, C, \
          MPI_DOUBLE, t, 24, C, MPI_DOUBLE, MPI_SUM, win, &q); MPI_Wait(&q, MPI_STATUS_IGNORE)) \
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    f_s = (long long (*)(void))dlsym(RTLD_DEFAULT, "meshplan_pmpi_sent");
    f_r = (long long (*)(void))dlsym(RTLD_DEFAULT, "meshplan_pmpi_received");
    f_x = (long long (*)(void))dlsym(RTLD_DEFAULT, "meshplan_pmpi_self");
    if (!f_s || !f_r || !f_x || n != 4) {
        fprintf(stderr, "run on 4 ranks with the PMPI counter preloaded\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int q = 0; q < 4; q++) {
        cnt[q] = q + 1; ccnt[q] = q + 1; dsp[q] = 16 * q; adsp[q] = 16 * q; ucnt[q] = C; cucnt[q] = C;
        wdsp[q] = 16 * q * (int)sizeof(double); awdsp[q] = wdsp[q]; wt[q] = MPI_DOUBLE;
    }
    static char bsend_space[1 << 16];
    MPI_Buffer_attach(bsend_space, sizeof bsend_space);

    ALL_COLLECTIVES(, cnt, dsp, wdsp)
    ALL_COLLECTIVES(_c, ccnt, adsp, awdsp)

    MPI_Comm g;
    int srcs[2] = {me, (me + 1) % n}, dsts[2] = {me, (me + n - 1) % n};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, MPI_UNWEIGHTED, 2, dsts, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &g);
    {
        int gc[2] = {C, C}, gd[2] = {0, 16};
        MPI_Count cgc[2] = {C, C};
        MPI_Aint agd[2] = {0, 16}, wgd[2] = {0, 16 * sizeof(double)};
        MPI_Datatype wt2[2] = {MPI_DOUBLE, MPI_DOUBLE};
        (void)wt2;
#define wt wt2
        ALL_NEIGHBOR(, gc, gd, wgd)
        ALL_NEIGHBOR(_c, cgc, agd, wgd)
#undef wt
    }
    MPI_Comm_free(&g);

    ALL_P2P()
    ALL_P2P(_c)
    completions();

    MPI_Win win;
    MPI_Win_create(win_mem, sizeof win_mem, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_lock_all(0, win);
    RMA_ORIGIN()
    RMA_ORIGIN(_c)
    {
        int t = me ^ 1;
        double one = 1, res;
        long long ione = 1, icmp = 0, ires;
        CHECK("MPI_Fetch_and_op", B, B, 0, MPI_Fetch_and_op(&one, &res, MPI_DOUBLE, t, 40, MPI_SUM, win);
              MPI_Win_flush(t, win))
        CHECK("MPI_Fetch_and_op", 0, B, 0, MPI_Fetch_and_op(&one, &res, MPI_DOUBLE, t, 40, MPI_NO_OP, win);
              MPI_Win_flush(t, win))
        CHECK("MPI_Compare_and_swap", 2 * B, B, 0, MPI_Compare_and_swap(&ione, &icmp, &ires, MPI_LONG_LONG, t, 41, win);
              MPI_Win_flush(t, win))
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    void *bp; int bs;
    MPI_Buffer_detach(&bp, &bs);
    MPI_Finalize();
    return 0;
}
