"""``plan_matmul(…).bind(comm)``: the MatmulExecutor inside an MPI program, on 2 and 4 ranks (one launch each).

This file is also the rank program: ``mpiexec -n P python tests/exec/test_matmul_executor.py JOB`` runs
every check below on every rank (any failing rank aborts the job) and rank 0 prints what ran.  Checked:
non-dividing sizes, several rounds, double-buffered rounds and idle ranks in the blocked layout (pieces equal
``G[ex.indices(…)]``, C equal numpy's, words received equal the model); ``out=`` (in place, strided, another
dtype); 100 calls of one executor (same result, no MPI handle made, flat memory); executors on the two halves
of a split COMM_WORLD at once and on a CountingComm; the scalapack layout against ScaLAPACK's own pdgemm on
the same pieces (square and non-square blocks, a process grid smaller than the communicator, on the world and
on a sub-communicator; skipped when ScaLAPACK is absent); the scalapack layout's conversions (rectangle copies)
against the global numpy arrays and the two layouts' element owners; bad input (one clear ModelError, on every
rank).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the rank side imports MPI; pytest's process does not need to
    from meshplan.exec.runtime.rank import RankContext

CHECKS = ("blocked", "out", "reuse", "subcomm", "scalapack", "conversions", "bad_input", "examples")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mpi"


def _globals(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def _run_blocked(comm, ex, A, B, tol):
    """distribute → multiply → collect on ``ex``; pieces and words against the model, C against numpy."""
    from meshplan.models.matmul.costs import cosma_rank_words

    r = comm.Get_rank()
    A_loc = ex.distribute("A", A if r == 0 else None)
    B_loc = ex.distribute("B", B if r == 0 else None)
    assert np.array_equal(A_loc, A[ex.indices("A")].astype(ex.dtype)) and A_loc.shape == ex.shape("A")
    assert np.array_equal(B_loc, B[ex.indices("B")].astype(ex.dtype))
    before = sum(ex.words.values())
    C_loc = ex(A_loc, B_loc)
    words = sum(ex.words.values()) - before
    assert words == cosma_rank_words(ex.problem, ex.schedule.grid, r).total, (r, words)
    # the memory model counts the buffers that exist: pieces, receive panels, C accumulator (independent sum)
    bufs = [*(getattr(ex, "_a_pan", None) or ()), *(getattr(ex, "_b_pan", None) or ()),
            getattr(ex, "_c_acc", None)]
    held = A_loc.size + B_loc.size + C_loc.size + sum(b.size for b in bufs if b is not None)
    assert held <= ex.schedule.memory_per_rank, (r, held, ex.schedule.memory_per_rank)
    C = ex.collect(C_loc)
    if r == 0:
        want = A @ B
        err = np.abs(C - want).max() / np.abs(want).max()
        assert err <= tol, (ex, err)
    else:
        assert C is None
    return A_loc, B_loc, C_loc


def check_blocked(ctx: RankContext) -> dict:
    import meshplan as mp
    from meshplan.exec.matmul.executor import MatmulExecutor
    from meshplan.models.matmul.problem import Grid, MatmulProblem
    from meshplan.solvers.matmul.plan import fixed_schedule

    from meshplan.solvers.matmul.plan import exhaustive_grid

    comm, p = ctx.world, ctx.size
    rounds = []
    tight = -(-(40 * 36 + 36 * 44 + 40 * 44) // p)  # the least memory any grid fits (only counted buffers)
    while exhaustive_grid(MatmulProblem(40, 36, 44, p, tight)) is None:
        tight += 1
    for m, n, k, kw in ((37, 29, 41, {}), (100, 70, 90, {}), (23, 3, 61, {"dtype": "f32"}),
                        (37, 29, 41, {"memory": 2 * (37 * 29 + 37 * 41 + 29 * 41) // p}),
                        (40, 36, 44, {"memory": tight})):
        plan = mp.plan_matmul(m, n, k, p, **kw)
        A, B = _globals(m, n, k)
        with plan.bind(comm) as ex:
            _run_blocked(comm, ex, A, B, 1e-5 if kw.get("dtype") == "f32" else 1e-12)
        rounds.append(plan.rounds)
    m, n, k = 37, 29, 41
    A, B = _globals(m, n, k, seed=1)
    prob = MatmulProblem(m, n, k, p)
    for grid, t, double in (((2, 1, p // 2), 3, True), ((1, p, 1), 4, True), ((1, max(1, p - 1), 1), 2, False)):
        sched = fixed_schedule(prob, Grid(*grid), t, double_buffered=double)
        with MatmulExecutor(comm, sched) as ex:
            _, _, C_loc = _run_blocked(comm, ex, A, B, 1e-12)
            if ctx.rank >= sched.grid.used:  # idle: empty pieces
                assert ex.shape("A") == (0, 0) and C_loc.shape == (0,)
    return {"rounds": rounds}


def check_out(ctx: RankContext) -> dict:
    import meshplan as mp

    comm = ctx.world
    m, n, k = 29, 31, 17
    A, B = _globals(m, n, k)
    with mp.plan_matmul(m, n, k, ctx.size).bind(comm) as ex:
        A_loc, B_loc = A[ex.indices("A")], B[ex.indices("B")]
        want = ex(A_loc, B_loc)
        out = np.empty(ex.shape("C"))
        assert ex(A_loc, B_loc, out=out) is out and np.array_equal(out, want)
        big = np.zeros(2 * ex.shape("C")[0])
        strided = big[::2]                                   # not contiguous: written in place all the same
        assert ex(A_loc, B_loc, out=strided) is strided and np.array_equal(big[::2], want) and not big[1::2].any()
        low = np.empty(ex.shape("C"), dtype=np.float32)     # another dtype: converted into it
        ex(A_loc, B_loc, out=low)
        assert np.allclose(low, want, rtol=1e-5, atol=1e-5)
        # inputs in Fortran order, as lists and in f32 are converted, never changed
        A_f = np.asfortranarray(A_loc)
        assert np.array_equal(ex(A_f, B_loc.tolist()), want)
        assert np.allclose(ex(A_loc.astype(np.float32), B_loc), want, rtol=1e-5, atol=1e-5)
    return {}


def check_reuse(ctx: RankContext) -> dict:
    import meshplan as mp
    from meshplan.exec.runtime import pmpi

    comm = ctx.world
    m, n, k = 41, 23, 57
    A, B = _globals(m, n, k)
    plan = mp.plan_matmul(m, n, k, ctx.size, memory=7 * (m * n + m * k + n * k) // (5 * ctx.size))  # rounds
    assert plan.ranks_used == ctx.size  # (the PMPI counter counts a Split that returns COMM_NULL as made)
    hb = pmpi.handles()
    ex = plan.bind(comm)
    A_loc, B_loc = A[ex.indices("A")], B[ex.indices("B")]
    want = ex(A_loc, B_loc)
    out = np.empty_like(want)
    for _ in range(10):
        ex(A_loc, B_loc, out=out)
    tracemalloc.start()
    h0, (m0, _) = pmpi.handles(), tracemalloc.get_traced_memory()
    for i in range(100):
        got = ex(A_loc * (i % 3), B_loc, out=out if i % 2 else None)
        assert np.allclose(got, want * (i % 3), rtol=1e-12, atol=1e-12)
    h1, (m1, _) = pmpi.handles(), tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert h0 == h1, (h0, h1)                                # no communicator or datatype made per call
    assert m1 - m0 < 64 * 1024, (m0, m1)                     # flat memory
    ex.close()
    h2 = pmpi.handles()
    if h2 is not None:
        made = (h2["comms_created"] - hb["comms_created"]) - (h2["comms_freed"] - hb["comms_freed"])
        assert made == 0 and h2["comms_created"] > hb["comms_created"], (hb, h2)  # close() freed the fibers
    return {"rounds": plan.rounds, "double_buffered": plan.double_buffered, "pmpi": h2 is not None,
            "memory_growth_bytes": m1 - m0}


def check_subcomm(ctx: RankContext) -> dict:
    import meshplan as mp
    from meshplan.exec.runtime.comms import ByteCounter, CountingComm

    world = ctx.world
    half = world.Split(ctx.rank % 2, ctx.rank)              # interleaved halves, each its own problem
    m, n, k = ((37, 29, 41), (23, 31, 19))[ctx.rank % 2]
    A, B = _globals(m, n, k, seed=ctx.rank % 2)
    plan = mp.plan_matmul(m, n, k, half.Get_size())
    with plan.bind(half) as ex:
        _run_blocked(half, ex, A, B, 1e-12)
    counter = ByteCounter()
    with plan.bind(CountingComm(half, counter)) as ex:      # a CountingComm: the executor counts into it
        assert ex.counter is counter
        ex(A[ex.indices("A")], B[ex.indices("B")])
        words = sum(ex.words.values())
        assert counter.received >= 8 * words and (words == 0 or counter.received > 0)
    half.Free()
    return {}


def _pdgemm(sl, comm, ex, A_loc, B_loc):
    """ScaLAPACK's pdgemm on the executor's block-cyclic pieces (same descriptor), C like ``ex`` returns it."""
    from meshplan.exec.runtime import scalapack

    (pr, pc), (mb, nb) = ex.grid, ex.block
    pb = ex.problem
    g = scalapack.grid(sl, pr, pc, comm)
    C = np.zeros(ex.shape("C"), order="F")
    if g.inside:
        def desc(rows, cols, local):
            return scalapack.descriptor(sl, g, rows, cols, mb, nb, local.shape[0])
        sl.pdgemm("N", "N", pb.m, pb.n, pb.k, 1.0, A_loc, 1, 1, desc(pb.m, pb.k, A_loc), B_loc, 1, 1,
                  desc(pb.k, pb.n, B_loc), 0.0, C, 1, 1, desc(pb.m, pb.n, C))
        sl.close_blacs_context(g.ctx)
    return C


def check_scalapack(ctx: RankContext) -> dict:
    import meshplan as mp
    from meshplan.exec.runtime import scalapack
    from meshplan.models.matmul.costs import cosma_rank_words
    from meshplan.models.matmul.layouts import conversion_words

    try:
        sl = scalapack.load_in(ctx.world)
    except scalapack.ScalapackUnavailable as why:
        return {"skipped": str(why)}
    from mpi4py import MPI

    world, p = ctx.world, ctx.size
    half = world.Split(ctx.rank // 2, ctx.rank)             # contiguous halves (one rank each on 2 ranks)
    ran = []
    for comm, kw in ((world, {}), (world, {"block": (4, 3), "grid": (1, max(1, p - 1))}),
                     (world, {"block": (5, 2), "grid": (2, p // 2)}), (half, {"block": 3})):
        q, r = comm.Get_size(), comm.Get_rank()
        m, n, k = 37, 29, 41
        A, B = _globals(m, n, k, seed=q)
        plan = mp.plan_matmul(m, n, k, q)
        with plan.bind(comm, layout="scalapack", **kw) as ex:
            A_loc, B_loc = np.asfortranarray(A[ex.indices("A")]), np.asfortranarray(B[ex.indices("B")])
            assert np.array_equal(ex.distribute("A", A if r == 0 else None), A_loc)
            before = sum(ex.words.values())
            C_loc = ex(A_loc, B_loc)
            words = sum(ex.words.values()) - before
            conv = conversion_words(ex.problem, ex.schedule.grid, ex.block, *ex.grid)[r]
            assert words == cosma_rank_words(ex.problem, ex.schedule.grid, r).total + sum(conv.values())
            assert C_loc.flags.f_contiguous and C_loc.shape == ex.shape("C")
            C_ref = _pdgemm(sl, comm, ex, A_loc, B_loc)
            diff = comm.allreduce(float(np.abs(C_loc - C_ref).max(initial=0.0)), op=MPI.MAX)
            scale = comm.allreduce(float(np.abs(C_ref).max(initial=0.0)), op=MPI.MAX)
            assert diff <= 1e-12 * scale, (kw, diff, scale)
            C = ex.collect(C_loc)
            if r == 0:
                assert np.abs(C - A @ B).max() <= 1e-12 * np.abs(A @ B).max()
            ran.append({"np": q, "block": list(ex.block), "grid": list(ex.grid), "rel_diff": diff / scale})
    half.Free()
    return {"ran": ran}


def check_conversions(ctx: RankContext) -> dict:
    """The scalapack layout's three conversions on non-dividing sizes, odd and non-square blocks, process grids
    smaller than the communicator (idle block-cyclic ranks), idle blocked ranks and C pieces that cut rows
    (pk > 1): the blocked pieces equal ``G[indices]`` of the blocked layout element for element, C converted
    back equals ``C[ex.indices("C")]`` exactly, inputs and ``out`` in either memory order, and the elements each
    rank sends to and receives from every rank are those the two layouts' owners give."""
    from meshplan.exec.matmul.executor import MatmulExecutor
    from meshplan.models.matmul.layouts import block_cyclic_owner, blocked_owner
    from meshplan.models.matmul.problem import Grid, MatmulProblem
    from meshplan.solvers.matmul.plan import fixed_schedule

    comm, p, me = ctx.world, ctx.size, ctx.rank
    cases = (((37, 29, 41), (1, 1), (1, p), (1, p, 1)),            # 1×1 blocks: the most pieces
             ((37, 29, 41), (5, 2), (2, p // 2), (2, 1, p // 2)),
             ((50, 7, 33), (7, 7), (p, 1), (1, 1, p)),             # C pieces are row-major element ranges
             ((23, 31, 19), (2, 9), (1, max(1, p - 1)), (1, max(1, p - 1), 1)),  # an idle rank on both sides
             ((33, 40, 35), (4, 3), (1, 1), (p, 1, 1)),            # one block-cyclic rank holds everything
             ((64, 64, 64), (64, 64), (2, p // 2), (1, 2, p // 2)))  # one tile per matrix
    ran = []
    for (m, n, k), block, grid, blocked_grid in cases:
        A, B = _globals(m, n, k, seed=m)
        C = A @ B
        sched = fixed_schedule(MatmulProblem(m, n, k, p), Grid(*blocked_grid), 2, double_buffered=True)
        with MatmulExecutor(comm, sched, layout="scalapack", block=block, grid=grid) as ex, \
                MatmulExecutor(comm, sched) as bl:
            a, b = np.asfortranarray(A[ex.indices("A")]), np.ascontiguousarray(B[ex.indices("B")])
            got = ex(a, b)
            assert np.abs(got - C[ex.indices("C")]).max(initial=0.0) <= 1e-12 * np.abs(C).max(), (m, block, grid)
            assert np.array_equal(ex._a_blk, A[bl.indices("A")]) and np.array_equal(ex._b_blk, B[bl.indices("B")])
            ex._c_blk[...] = C[bl.indices("C")]
            for order in "FC":
                out = np.full(ex.shape("C"), np.nan, order=order)
                ex._xc.run(ex, "c_out", out)
                assert np.array_equal(out, C[ex.indices("C")]), (m, block, grid, order)
            for w, conv in (("A", ex._xa), ("B", ex._xb), ("C", ex._xc)):
                cyc = np.broadcast_arrays(*ex.indices(w))
                blk = np.broadcast_arrays(*bl.indices(w))
                to_blocked = blocked_owner(ex.problem, sched.grid, w, *cyc).ravel()
                to_cyclic = block_cyclic_owner(*blk, ex.block, *ex.grid).ravel()
                sent, received = (to_blocked, to_cyclic) if w != "C" else (to_cyclic, to_blocked)
                assert conv.send_counts == np.bincount(sent, minlength=p).tolist(), (w, m, block, grid)
                assert conv.recv_counts == np.bincount(received, minlength=p).tolist(), (w, m, block, grid)
            ran.append({"block": list(ex.block), "grid": list(ex.grid), "blocked_grid": list(blocked_grid),
                        "c_copies": len(ex._xc.blocked_pairs)})
    return {"ran": ran}


def _raises(fn, *needles):
    from meshplan.models.core.errors import ModelError

    try:
        fn()
    except ModelError as err:
        assert all(s in str(err) for s in needles), (str(err), needles)
        return str(err)
    raise AssertionError(f"no ModelError (wanted {needles})")


def check_bad_input(ctx: RankContext) -> dict:
    import meshplan as mp

    comm, r = ctx.world, ctx.rank
    plan = mp.plan_matmul(29, 31, 17, ctx.size)
    msgs = {"size": _raises(lambda: mp.plan_matmul(29, 31, 17, ctx.size + 1).bind(comm), "comm has", "p=")}
    msgs["layout"] = _raises(lambda: plan.bind(comm, layout="cyclic"), "layout")
    msgs["block"] = _raises(lambda: plan.bind(comm, block=(4, 4)), "scalapack")
    msgs["grid"] = _raises(lambda: plan.bind(comm, layout="scalapack", grid=(ctx.size, 2)), "grid")
    msgs["block_value"] = _raises(lambda: plan.bind(comm, layout="scalapack", block=(0, 3)), "block")
    ex = plan.bind(comm)
    A_loc, B_loc = np.zeros(ex.shape("A")), np.zeros(ex.shape("B"))
    msgs["shape"] = _raises(lambda: ex(np.zeros((1, 1)), B_loc), f"rank {r}", str(ex.shape("A")))
    msgs["out"] = _raises(lambda: ex(A_loc, B_loc, out=np.zeros(7 + ex.shape("C")[0])), "out", f"rank {r}")
    msgs["which"] = _raises(lambda: ex.distribute("C", None), "which")
    msgs["global"] = _raises(lambda: ex.distribute("A", np.zeros((3, 3)) if r == 0 else None), "(29, 17)")
    wrong = np.zeros(5) if r == ctx.size - 1 else np.zeros(ex.shape("C"))  # one rank: all ranks learn it
    msgs["collect"] = _raises(lambda: ex.collect(wrong), f"rank {ctx.size - 1}")
    ex.close()
    msgs["closed"] = _raises(lambda: ex(A_loc, B_loc), "closed")
    return {"messages": msgs}


def check_examples(ctx: RankContext) -> dict:
    """examples/mpi/matmul*.py, as a batch runner calls them: ``main(comm)`` on the world and on halves."""
    import contextlib
    import importlib.util
    import io

    out = {}
    half = ctx.world.Split(ctx.rank % 2, ctx.rank)
    for name in ("matmul", "matmul_scalapack"):
        spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):          # rank 0 prints its verdict line
            errs = [module.main(ctx.world), module.main(half)]
        out[name] = {"errors": errs, "printed": printed.getvalue()}
    half.Free()
    return out


def handle(ctx: RankContext, job: dict) -> dict:
    out = {}
    for name in job["checks"]:
        out[name] = globals()[f"check_{name}"](ctx)
        ctx.world.Barrier()
    return out


if __name__ == "__main__":
    from meshplan.exec.runtime.rank import rank_main

    rank_main(handle)


# -- the tests (pytest side) -------------------------------------------------------------------------

import pytest  # noqa: E402

pytestmark = pytest.mark.mpi
_RESULTS: dict[int, dict] = {}


def _results(np_: int, tmp_path_factory) -> dict:
    from meshplan.exec.runtime import pmpi
    from meshplan.exec.runtime.launch import run_mpi_json

    if np_ not in _RESULTS:
        try:
            env = pmpi.preload_env()
        except pmpi.PmpiUnavailable:  # pragma: no cover - gcc is on the CI machine
            env = None
        job = tmp_path_factory.mktemp(f"matmul-executor-{np_}") / "job.json"
        job.write_text(json.dumps({"checks": list(CHECKS)}))
        _RESULTS[np_] = run_mpi_json(np_, [str(Path(__file__).resolve()), str(job)], timeout_s=600, env=env)
    return _RESULTS[np_]


@pytest.fixture(params=[2, 4], ids=lambda n: f"np{n}")
def results(request, tmp_path_factory):
    return _results(request.param, tmp_path_factory)


def test_blocked_layout_non_dividing_rounds_double_buffered_idle(results):
    assert max(results["blocked"]["rounds"]) > 1


def test_out_and_converted_inputs(results):
    assert results["out"] == {}


def test_reuse_makes_no_handles_and_keeps_memory_flat(results):
    got = results["reuse"]
    assert got["rounds"] > 1 and got["memory_growth_bytes"] < 64 * 1024
    if not got["pmpi"]:  # pragma: no cover - gcc is on the CI machine
        pytest.skip("the PMPI counter (which counts MPI handles) could not be built")


def test_sub_communicators_and_counting_comm(results):
    assert results["subcomm"] == {}


def test_scalapack_layout_equals_pdgemm_on_the_same_pieces(results):
    got = results["scalapack"]
    if "skipped" in got:
        pytest.skip(f"ScaLAPACK not installed: {got['skipped']}")
    assert len(got["ran"]) == 4 and all(x["rel_diff"] <= 1e-12 for x in got["ran"])
    assert any(x["block"][0] != x["block"][1] for x in got["ran"])


def test_scalapack_conversions_match_numpy_and_the_owners(results):
    got = results["conversions"]["ran"]
    assert len(got) == 6 and any(x["block"][0] != x["block"][1] for x in got)


def test_examples_verify_on_the_world_and_on_sub_communicators(results):
    got = results["examples"]
    errs = got["matmul"]["errors"]
    assert all(e is not None and e <= 1e-12 for e in errs) and "verified" in got["matmul"]["printed"]
    scal = got["matmul_scalapack"]
    if "skipped" in scal["printed"]:
        pytest.skip(scal["printed"].strip())
    assert all(e <= 1e-12 for e in scal["errors"]) and "verified" in scal["printed"]


def test_bad_input_names_the_parameter_and_the_rank(results):
    msgs = results["bad_input"]["messages"]
    assert set(msgs) >= {"size", "layout", "block", "grid", "shape", "out", "which", "global", "collect", "closed"}
    assert not any("--" in m for m in msgs.values())        # API parameters, never CLI flags
