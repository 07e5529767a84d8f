"""SOAP conditions, projections (section 5.5) and subgraph statements (Definition 5.6)."""

from __future__ import annotations

import itertools
from pathlib import Path

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.soap import Term, build_sdg, check_conditions, parse_file, parse_source, subgraph_problem

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def _single(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    g = build_sdg(p)
    return p, g


def test_example_5_1_stencil_is_soap_with_the_thesis_offsets():
    p, g = _single("stencil_5_1")
    statuses = {f.condition: f.status for f in check_conditions(p)}
    assert statuses["5"] == "ok" and statuses["6"] == "ok" and statuses["7"] == "ok"
    prob = subgraph_problem(g, ("A",))
    terms = {t.array: t for t in prob.terms}
    # A: accessed as [i,t+1] (out), [i-1,t], [i,t], [i+1,t]: offset sets {-1,1} in i, {1} in t
    assert terms["A"].kind == "inout" and dict(zip(terms["A"].dims, terms["A"].t)) == {("i",): 2, ("t",): 1}
    assert terms["B"].kind == "input" and terms["B"].dims == (("i",),)
    D = prob.symbols
    I, T = D["i"], D["t"]
    # Corollary 5.1: |A| >= IT - (I-2)(T-1); B: I
    assert sp.expand(prob.access_expr() - (I * T - (I - 2) * (T - 1) + I)) == 0


def test_example_5_4_lu_update_splits_into_three_arrays_with_a_version_dimension():
    (p,) = parse_source("""
def lu_update(N):
    for k in range(N):
        for i in range(k + 1, N):
            for j in range(k + 1, N):
                A[i, j] = A[i, j] - A[i, k] * A[k, j]
""")
    findings = {f.condition: f for f in check_conditions(p)}
    assert findings["6"].status == "projected" and "5.5.1" in findings["6"].message
    assert findings["7"].status == "projected" and "(k)" in findings["7"].message   # Example 5.5
    prob = subgraph_problem(build_sdg(p), ("A",))
    kinds = sorted((t.kind, t.dims) for t in prob.terms)
    # St3: A1[i,j,k+1] = f(A1[i,j,k], A2[i,k], A3[k,j])
    assert kinds == [("inout", (("i",), ("j",))), ("input", (("i",), ("k",))), ("input", (("k",), ("j",)))]
    inout = next(t for t in prob.terms if t.kind == "inout")
    assert inout.version == ("k",) and inout.t_version == 1
    D = prob.symbols
    assert sp.expand(prob.access_expr() - (D["i"] * D["j"] + D["i"] * D["k"] + D["k"] * D["j"])) == 0


def test_example_5_6_convolution_is_projected_as_non_injective():
    p, g = _single("conv2d")
    f5 = next(f for f in check_conditions(p) if f.condition == "5")
    assert f5.status == "projected" and "5.5.3" in f5.message
    img = next(t for t in subgraph_problem(g, ("Out",)).terms if t.array == "Img")
    assert ("h", "r") in img.dims and ("s", "w") in img.dims   # h+r and w+s: two variables per dimension


def test_figure_5_2_sdg_edges_and_subgraph_statements():
    (p,) = parse_source("""
def fig(N):
    for i in range(N):
        for j in range(N):
            C[i, j] = A[i, j] * B[i, j]
    for i in range(N):
        for j in range(N):
            E[i, j] = E[i, j] + C[i, j] * D[i, j]
""")
    g = build_sdg(p)
    assert g.edges == {("A", "C"), ("B", "C"), ("C", "E"), ("D", "E"), ("E", "E")}
    assert set(g.inputs) == {"A", "B", "D"}
    assert sorted(g.connected_subsets()) == [("C",), ("C", "E"), ("E",)]
    h3 = subgraph_problem(g, ("C", "E"))           # In(St_H3) = {A, B, D}; C is computed inside
    assert {t.array for t in h3.terms if t.kind == "input"} == {"A", "B", "D"}
    assert all(t.array != "C" or t.kind == "inout" for t in h3.terms)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(
    st.lists(st.integers(1, 5), min_size=d, max_size=d),
    st.lists(st.lists(st.integers(-2, 2), min_size=d, max_size=d), min_size=1, max_size=4))))
def test_lemma_5_3_never_exceeds_the_union_of_translated_boxes(case):
    sizes, shifts = case
    d = len(sizes)
    shifts = [[0] * d] + shifts
    that = [len({s[i] for s in shifts} - {0}) for i in range(d)]
    if any(n < t for n, t in zip(sizes, that)):
        return  # Lemma 5.3 assumes |D^i| >= |t^i|
    box = set(itertools.product(*[range(n) for n in sizes]))
    union = {tuple(x + s for x, s in zip(pt, sh)) for pt in box for sh in shifts}
    term = Term("A", "input", tuple((f"v{i}",) for i in range(d)), tuple(that))
    bound = term.size({f"v{i}": sp.Integer(n) for i, n in enumerate(sizes)})
    assert bound <= len(union)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(
    st.lists(st.integers(1, 5), min_size=d, max_size=d),
    st.lists(st.lists(st.integers(-2, 2), min_size=d, max_size=d), min_size=1, max_size=4))))
def test_corollary_5_1_never_exceeds_the_inputs_not_computed_in_the_box(case):
    sizes, shifts = case
    d = len(sizes)
    shifts = [[0] * d] + shifts
    that = [len({s[i] for s in shifts} - {0}) for i in range(d)]
    if any(n < t for n, t in zip(sizes, that)):
        return
    box = set(itertools.product(*[range(n) for n in sizes]))           # computed: phi_0 = identity
    reads = {tuple(x + s for x, s in zip(pt, sh)) for pt in box for sh in shifts}
    term = Term("A", "inout", tuple((f"v{i}",) for i in range(d)), tuple(that))
    bound = term.size({f"v{i}": sp.Integer(n) for i, n in enumerate(sizes)})
    assert bound <= len(reads | box) - len(box)


def test_triangular_pair_of_cholesky_counts_its_rows_coinciding():
    # Not two arrays (the thesis's Cholesky treatment, section 4.6.2): a tile whose i and j rows coincide
    # beats that count (Beaumont et al.'s triangle-block schedule, SPAA 2022; the replay in
    # tests/solvers/test_soap_counter_schedules.py), so the pair is |D^j|·|D^k| + |D^i|·|D^k|/2
    # (models/soap/coincide.py); the two boxes are its parts, j's (the shrunk class) first.
    (p,) = parse_source("""
def syrk(N, M):
    for i in range(N):
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += A[i, k] * A[j, k]
""")
    prob = subgraph_problem(build_sdg(p), ("C",))
    (pair,) = [t for t in prob.terms if t.array == "A"]
    assert pair.kind == "pair" and pair.parts == ((("j",), ("k",)), (("i",), ("k",)))
    D = {v: sp.Symbol(f"D_{v}", positive=True) for v in ("i", "j", "k")}
    assert sp.expand(pair.size(D) - D["j"] * D["k"] - D["i"] * D["k"] / 2) == 0
    assert any("4.6.2" in n for n in prob.notes)


def test_overlapping_reads_of_one_array_become_a_bounded_union():
    (p,) = parse_source("""
def outer(N, M):
    for i in range(N):
        for j in range(M):
            for k in range(N):
                C[i, j] += x[i, k] * x[j, k]
""")
    prob = subgraph_problem(build_sdg(p), ("C",))
    (u,) = [t for t in prob.terms if t.array == "x"]
    assert u.kind == "union"
    D = prob.symbols
    # |x[i,k] ∪ x[j,k]| ≥ its largest part (section 5.5.3; split into cases by models.soap.cases)
    assert u.size(D) == sp.Max(D["i"] * D["k"], D["j"] * D["k"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sets(st.integers(-6, 6), min_size=1, max_size=5), min_size=2, max_size=3),
       st.lists(st.integers(1, 3), min_size=3, max_size=3))
def test_non_injective_side_never_exceeds_the_distinct_values(sets, coeffs):
    """Section 5.5.3: g = Σ c_v·v on any tile D^v takes ≥ max |D^v| distinct values (the side's max)."""
    names = [f"v{i}" for i in range(len(sets))]
    values = {sum(c * x for c, x in zip(coeffs, pt)) for pt in itertools.product(*sets)}
    term = Term("A", "input", (tuple(names),), (0,))
    bound = term.size({n: sp.Integer(len(s)) for n, s in zip(names, sets)})
    assert bound <= len(values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=2, max_size=3))
def test_union_term_never_exceeds_the_union_of_its_parts(parts):
    """A union of overlapping groups has at least as many elements as its largest group."""
    # part p reads A[a_p·i + j] over the box i < n_p... here: boxes of a 2-d array at the origin
    boxes = [set(itertools.product(range(a), range(b))) for a, b in parts]
    union = set().union(*boxes)
    term = Term("A", "union", (), (), parts=tuple(((f"a{p}",), (f"b{p}",)) for p in range(len(parts))))
    D = {}
    for p, (a, b) in enumerate(parts):
        D[f"a{p}"], D[f"b{p}"] = sp.Integer(a), sp.Integer(b)
    assert term.size(D) <= len(union)


def test_examples_5_2_and_5_3_domain_and_access_set_of_one_iteration():
    from meshplan.models.soap.access import components, elements, sample_iterations

    p, _ = _single("stencil_5_1")
    (st_,) = p.statements
    iters = sample_iterations(st_, {"N": 8, "T": 4})
    # Example 5.2: [t, i] = [2, 1] is not in the iteration domain (i starts at t), [1, 1], [1, 2], [2, 2] are
    assert (2, 1) not in iters and {(1, 1), (1, 2), (2, 2)} <= set(iters)
    # Example 5.3: psi = [t=2, i=2] writes A[2, 3] and reads A[1, 2], A[2, 2], A[3, 2] and B[2]
    comps = components(p, st_, 0)
    touched = {(c.role, c.array): elements(c, st_, [(2, 2)], {"N": 8, "T": 4}) for c in comps}
    assert touched[("out", "A")] == {(2, 3)}
    reads_a = set().union(*[elements(c, st_, [(2, 2)], {"N": 8, "T": 4}) for c in comps
                            if c.array == "A" and c.role != "out"])
    assert reads_a == {(1, 2), (2, 2), (3, 2)} and touched[("read", "B")] == {(2,)}


def _symm_chain_entries(I, K, J, M):
    """Older versions of ``C`` a symm tile needs from outside: along each element's chain (S4 at ``i = x``,
    then S1 at ``i = x+1 … M−1``), one per maximal run of instances inside the tile, counted by hand."""
    need = 0
    for x in range(M):
        for j in J:
            chain = [x in I] + [i in I and x in K for i in range(x + 1, M)]
            need += sum(1 for n, inside in enumerate(chain) if inside and (n == 0 or not chain[n - 1]))
    return need


def test_two_writers_of_one_array_count_each_element_once():
    """symm writes C by ``C[k, j] += …`` (version loop i) and ``C[i, j] = β·C[i, j] + …``: one bounded-overlap
    union, not two Corollary 5.1 terms, since a tile whose i and k rows coincide enters each element's
    chain once (the sum over-counted the dominator); LU's column, read by the update as an operand,
    keeps its own term (section 4.4.2)."""
    p, g = _single("symm")
    prob = subgraph_problem(g, ("C",))
    (c,) = [t for t in prob.terms if t.array == "C"]
    assert c.kind == "union" and sorted(c.parts) == [(("i",), ("j",)), (("k",), ("j",))]
    assert any("several statements" in n for n in prob.notes)
    M = 7
    for lo_i, hi_i, lo_k, hi_k in [(0, 7, 0, 7), (2, 6, 2, 6), (4, 7, 0, 3), (1, 5, 0, 4), (3, 4, 0, 3)]:
        I, K, J = range(lo_i, hi_i), range(lo_k, hi_k), range(2)
        real = _symm_chain_entries(set(I), set(K), J, M)
        size = c.size({"i": len(I), "k": len(K), "j": len(J)})
        assert size <= real
        if lo_i == lo_k and hi_i == hi_k:
            assert 2 * len(I) * len(J) > real    # the two terms' sum exceeds the dominator
    (q,) = parse_file(str(EX / "lu.py"))
    lu = subgraph_problem(build_sdg(q), ("A",))
    assert sorted(t.dims for t in lu.terms if t.array == "A" and t.kind == "inout") == \
        [(("i_2",), ("j",)), (("i_2",), ("k",))]


def test_a_read_apart_from_the_writes_in_each_version_is_a_second_array():
    """gramschmidt's ``Q[i, k] = A[i, k]/R[k, k]`` reads column k of A, which within one step k the update
    ``A[i, j] -= Q[i, k]·R[k, j]`` (j > k) does not write: a second array, as LU's column (section 5.5.1),
    not a part of a bounded-overlap union with the written box."""
    from meshplan.models.soap.expand import expand_temporaries
    from meshplan.models.soap.scalars import split_scalars

    (p,) = parse_file(str(EX / "gramschmidt.py"))
    p, _ = split_scalars(p)
    p, _ = expand_temporaries(p)
    prob = subgraph_problem(build_sdg(p), ("R", "A", "Q"))
    a = [t for t in prob.terms if t.array == "A"]
    assert any(t.kind == "input" and t.dims[1] == ("k",) for t in a)
    assert any("5.5.1, as for LU" in n for n in prob.notes)
    # an in-place update whose version reads its own column (LU's A[i, k] read by the update) is not affected
    (q,) = parse_file(str(EX / "lu.py"))
    lu = subgraph_problem(build_sdg(q), ("A",))
    assert not any("as for LU" in n and "computed inside" in n for n in lu.notes)
