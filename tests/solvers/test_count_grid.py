"""Work and depth on a process grid (thesis chapter 2, section 2.1.1): every grid dimension has its own rank
variable and process count, declared by ``assert 0 <= r < p and 0 <= s < q``; the count of the most loaded
rank, W and D are checked against executing every rank of the grid."""

from __future__ import annotations

import itertools

import pytest

from meshplan.models.core.errors import ParseError
from meshplan.models.counting.execute import execute, execute_ranks
from meshplan.models.counting.problem import CountProblem
from meshplan.solvers.counting.count import count_problem

GEMM_2D = """
def gemm(NI, NJ, NK, alpha, beta, p, q, ri, rj):
    assert 0 <= ri < p and 0 <= rj < q
    for i in range(ri * NI // p, min((ri + 1) * NI // p, NI)):
        for j in range(rj * NJ // q, min((rj + 1) * NJ // q, NJ)):
            C[i, j] *= beta
        for k in range(NK):
            for j in range(rj * NJ // q, min((rj + 1) * NJ // q, NJ)):
                C[i, j] += alpha * A[i, k] * B[k, j]
"""

ALL_PQ = tuple(itertools.product((1, 2, 3, 8), repeat=2))
SHAPES = tuple(dict.fromkeys(((1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (1, 8), (8, 1), (2, 4)) + ALL_PQ))


def _check(res, sizes: dict, shapes=SHAPES, procs=("p", "q")) -> None:
    metrics = res.metrics  # derived anew on every access
    for vals in sizes:
        for shape in shapes:
            v = {**vals, **dict(zip(procs, shape))}
            per, total = execute_ranks(res.flow, v)
            assert res.evaluate(res.total.value, v) == total, (v, total)
            for st in res.statements:
                assert res.evaluate(st.count.value, v) == per[st.name], (v, st.name)
        one = execute_ranks(res.flow, {**vals, **{q: 1 for q in procs}})[1]
        assert res.evaluate(metrics["work"], vals) == one, vals
        # depth: every grid dimension with at least as many ranks as points, so no rank holds two
        wide = {q: max(max(vals.values()), 1) for q in procs}
        assert res.evaluate(metrics["depth"], vals) == execute_ranks(res.flow, {**vals, **wide})[1], vals


def test_gemm_on_a_2d_grid_has_depth_nk_plus_one():
    (res,) = count_problem(CountProblem.of(GEMM_2D))
    assert res.flow.grid == (("ri", "p"), ("rj", "q"))
    assert res.exact and not res.unknowns
    assert str(res.total.value) == "NK*ceiling(NI/p)*ceiling(NJ/q) + ceiling(NI/p)*ceiling(NJ/q)"
    assert str(res.metrics["depth"]) == "Piecewise((NK + 1, (NI >= 1) & (NJ >= 1)), (0, True))"
    assert str(res.metrics["work"]) == "NI*NJ*(NK + 1)"
    sizes = [dict(NI=a, NJ=b, NK=c) for a, b, c in itertools.product((0, 1, 5), (0, 2, 7), (0, 3))]
    _check(res, sizes)


JACOBI_2D_GRID = """
def jacobi2d(T, n, p, q, r, s):
    assert 0 <= r < p and 0 <= s < q
    for t in range(T):
        for i in range(1 + r * (n - 2) // p, 1 + min((r + 1) * (n - 2) // p, n - 2)):
            for j in range(1 + s * (n - 2) // q, 1 + min((s + 1) * (n - 2) // q, n - 2)):
                B[i, j] = A[i, j] + A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1]
        for i in range(1 + r * (n - 2) // p, 1 + min((r + 1) * (n - 2) // p, n - 2)):
            for j in range(1 + s * (n - 2) // q, 1 + min((s + 1) * (n - 2) // q, n - 2)):
                A[i, j] = B[i, j]
"""


def test_jacobi_2d_on_a_2d_grid_with_offset_blocks():
    """Interior rows and columns 1 … n - 2 split over a p x q grid: depth 2T (one point per rank and sweep)."""
    (res,) = count_problem(CountProblem.of(JACOBI_2D_GRID))
    assert res.exact
    assert str(res.metrics["depth"]) == "Piecewise((2*T, (T >= 1) & (n >= 3)), (0, True))"
    _check(res, [dict(T=t, n=n) for t in (1, 2) for n in (0, 1, 2, 3, 4, 7)])


LU_GRID = """
def lu(n, p, q, r, s):
    assert 0 <= r < p and 0 <= s < q
    for k in range(n):
        for i in range(max(k + 1, r * n // p), min((r + 1) * n // p, n)):
            for j in range(max(k + 1, s * n // q), min((s + 1) * n // q, n)):
                A[i, j] -= A[i, k] * A[k, j]
"""


def test_lu_update_on_a_2d_grid_is_exact():
    """The trailing update of LU with rows over p and columns over q: the last block of both is the heaviest
    (proved by translating the block's loop, ``j -> j + 1``, into the block moved right), so the count of
    the most loaded grid point, W and D are exact at every p, q in {1, 2, 3, 8}."""
    (res,) = count_problem(CountProblem.of(LU_GRID))
    assert res.exact and not res.unknowns
    assert res.methods == {"S1": "barvinok (block ends as parameters)"}
    m = res.metrics
    assert str(m["work"]) == "n*(n - 1)*(2*n - 1)/6" and str(m["depth"]) == "Piecewise((n - 1, n >= 2), (0, True))"
    _check(res, [dict(n=n) for n in (0, 1, 2, 3, 5, 8)], shapes=ALL_PQ)


UPPER_GRID = """
def upper(n, p, q, r, s):
    assert 0 <= r < p and 0 <= s < q
    for i in range(r * n // p, min((r + 1) * n // p, n)):
        for j in range(max(i, s * n // q), min((s + 1) * n // q, n)):
            A[i, j] = 0.0
"""

CHOLESKY_GRID = """
def cholesky(n, p, q, r, s):
    assert 0 <= r < p and 0 <= s < q
    for k in range(n):
        for i in range(max(k + 1, r * n // p), min((r + 1) * n // p, n)):
            for j in range(max(k + 1, s * n // q), min((s + 1) * n // q, i + 1)):
                A[i, j] -= A[i, k] * A[j, k]
"""


@pytest.mark.parametrize("src, shape", [(UPPER_GRID, (2, 2)), (CHOLESKY_GRID, (1, 8))])
def test_grids_whose_last_block_is_not_the_heaviest_are_not_claimed_exact(src, shape):
    """Upper-triangular rows over p (the first row block is the longest) and Cholesky's lower-triangular
    trailing update (column j counts j·(n - j) points, largest in the middle): the last blocks are not the
    heaviest, so no proof may succeed, and the answer says it is not exact; its bounds, where it has any,
    hold the executed count."""
    from meshplan.solvers.counting.blocks import count_blocks

    (res,) = count_problem(CountProblem.of(src))
    v = {"n": 8, "p": shape[0], "q": shape[1]}
    per_rank = [sum(execute(res.flow, {**v, "r": r, "s": s}).values())
                for r, s in itertools.product(range(shape[0]), range(shape[1]))]
    assert max(per_rank) > per_rank[-1], per_rank  # a claim at the last blocks would be wrong
    assert count_blocks(res.flow, "p") is None
    assert not res.exact
    for n in (0, 1, 3, 5):
        for p, q in ((1, 1), (2, 3), (3, 2)):
            v = {"n": n, "p": p, "q": q}
            total = execute_ranks(res.flow, v)[1]
            lo, hi = (res.evaluate(res.with_unknowns(e, i), {**v, "u1": 0}) for i, e in
                      enumerate((res.total.lo, res.total.hi)))
            assert res.total.value is None or "u1" in str(res.total.value) or lo <= total <= hi


THREE_D = """
def mm3d(n, p1, p2, p3, a, b, c):
    assert 0 <= a < p1 and 0 <= b < p2 and 0 <= c < p3
    for i in range(a * n // p1, min((a + 1) * n // p1, n)):
        for j in range(b * n // p2, min((b + 1) * n // p2, n)):
            for k in range(c * n // p3, min((c + 1) * n // p3, n)):
                C[i, j] += A[i, k] * B[k, j]
"""


def test_three_dimensional_grid():
    (res,) = count_problem(CountProblem.of(THREE_D))
    assert res.exact and str(res.metrics["depth"]) == "Piecewise((1, n >= 1), (0, True))"
    _check(res, [dict(n=n) for n in (0, 1, 3, 4)], shapes=((1, 1, 1), (2, 1, 3), (2, 2, 2), (1, 4, 1)),
           procs=("p1", "p2", "p3"))


@pytest.mark.parametrize("decl, msg", [
    ("assert r < p", "does not declare a process grid"),
    ("assert 0 <= r < p and 0 <= r < q", "its own rank variable"),
    ("assert 0 <= r < r", "two different names"),
])
def test_bad_grid_declarations_are_refused(decl, msg):
    src = f"def f(n, p, q, r):\n    {decl}\n    for i in range(r * n // p, min((r + 1) * n // p, n)):\n        A[i] = 0\n"
    with pytest.raises(ParseError, match=msg):
        CountProblem.of(src)


def test_assert_inside_a_loop_is_refused():
    src = "def f(n, p, r):\n    for i in range(n):\n        assert 0 <= r < p\n        A[i] = 0\n"
    with pytest.raises(ParseError, match="top of the function"):
        CountProblem.of(src)


def test_the_plan_names_the_grid_and_verifies_every_grid_point():
    from meshplan.api.counting import count_iterations

    plan = count_iterations(GEMM_2D, params="NI=5,NJ=7,NK=3,p=2,q=3", verify=True)
    js = plan.to_json()
    assert js["grid"] == {"ri": "p", "rj": "q"} and js["rank"] == "ri"
    assert js["values"]["total"] == 36 and js["values"]["depth"] == 4  # ceil(5/2)*ceil(7/3)*(3+1); NK+1
    assert plan.verification.ok


def test_pruned_pieces_equal_the_count_at_every_point():
    """W and D drop the pieces no parameter value reaches and merge pieces that agree: on random piecewise
    counts in two parameters (affine conditions, nested pieces) the pruned form equals the original at every
    point 0 … 9, and it never has more pieces."""
    import random

    import sympy as sp

    from meshplan.solvers.counting.pieces import prune_pieces

    n, T = sp.symbols("n T", integer=True, nonnegative=True)
    rng = random.Random(7)

    def cond():
        x = rng.choice((n, n, T))
        rel = rng.choice((sp.Ge, sp.Gt, sp.Le, sp.Lt, sp.Eq, sp.Ne))(x, rng.randint(-1, 4))
        return rel if rng.random() < 0.6 else sp.And(rel, rng.choice((sp.Ge, sp.Le))(rng.choice((n, T)), rng.randint(0, 3)))

    def value(depth):
        v = rng.choice((n - 1, n * n / 2 - n / 2, T * (n - 2), sp.Integer(1), sp.Integer(0), n))
        return v if depth == 0 or rng.random() < 0.6 else v + rng.choice((1, T)) * piecewise(depth - 1)

    def piecewise(depth=1):
        return sp.Piecewise(*[(value(depth), cond()) for _ in range(rng.randint(1, 4))], (value(0), True))

    def pieces(e):
        return sum(len(pw.args) for pw in e.atoms(sp.Piecewise))

    fewer = 0
    for _ in range(150):
        e = piecewise()
        got = prune_pieces(e)
        assert pieces(got) <= pieces(e), (e, got)
        fewer += pieces(got) < pieces(e)
        for a in range(10):
            for b in range(4):
                assert got.xreplace({n: a, T: b}) == e.xreplace({n: a, T: b}), (e, got, a, b)
    assert fewer >= 30, fewer  # the pruning happens, not only its identity


def test_unreachable_block_pieces_are_dropped_and_the_rest_kept():
    """Pieces whose condition on block counts ceiling(E/q), floor(E/q) cannot hold are dropped (isl on the range
    of those counts over every q >= 1); on random conditions the dropped form equals the original at every
    point n < 8, p, q in {1, 2, 3, 8}, and some pieces are dropped."""
    import random

    import sympy as sp

    from meshplan.solvers.counting.pieces import drop_unreachable

    n = sp.Symbol("n", integer=True, nonnegative=True)
    p, q = sp.symbols("p q", integer=True, positive=True)
    atoms = (n, n, sp.ceiling(n / p), sp.ceiling(n / q), sp.floor(n / p), sp.ceiling((n - 2) / q), sp.floor((n - 2) / p))
    rng = random.Random(11)

    def rel():
        lhs = sum(rng.choice((-1, 1, 2)) * rng.choice(atoms) for _ in range(rng.randint(1, 2)))
        return rng.choice((sp.Ge, sp.Le, sp.Eq, sp.Gt))(lhs, rng.randint(-2, 3))

    dropped = 0
    for _ in range(80):
        e = sp.Piecewise(*[(rng.randint(1, 9) * n + k, sp.And(rel(), rel())) for k in range(3)], (0, True))
        got = drop_unreachable(e)
        if got == e:
            continue
        dropped += 1
        f, g = (sp.lambdify((n, p, q), x, "math") for x in (e, got))
        for a, b, c in itertools.product(range(8), (1, 2, 3, 8), (1, 2, 3, 8)):
            assert f(a, b, c) == g(a, b, c), (e, got, a, b, c)
    assert dropped >= 10, dropped
    lu_dead = (n >= 1) & (n - sp.ceiling(n / p) >= 2) & (n <= n - sp.ceiling(n / q) - 1)
    assert drop_unreachable(sp.Piecewise((n, lu_dead), (n + 1, n >= 2), (0, True))) == sp.Piecewise((n + 1, n >= 2),
                                                                                                     (0, True))
