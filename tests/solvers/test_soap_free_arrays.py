"""Arrays written only by excluded statements (no vertices left) join every subgraph that reads
them (solvers/soap/bound.py, _without_excluded): ρ can only rise, so the bound stays valid."""

from __future__ import annotations

from meshplan.models.soap import build_sdg, parse_source, subgraph_problem
from meshplan.models.soap.expand import expand_temporaries
from meshplan.models.soap.scalars import split_scalars
from meshplan.solvers.soap.bound import analyze, leading_term
from meshplan.solvers.soap.chi import SAMPLE_S, intensity

#: a filter in deriche's shape: a state reset to 0.0 per row and read along it.  (Deriche's states
#: are also copied along the row, xm1 = x[i, j]; a read then sees the reset at j = 0 and the copy
#: after it, so the state is one chain, written by a bounded statement too, and is not free.)
FILTER = """
def filt(W, H, a, b):
    for i in range(W):
        ym1 = 0.0
        xm1 = 0.0
        for j in range(H):
            y[i, j] = a * x[i, j] + a * xm1 + b * ym1
    for i in range(W):
        for j in range(H):
            out[i, j] = y[i, j] * x[i, j]
"""


def test_free_arrays_join_their_readers_and_dominate_every_subset_with_them():
    (prog,) = parse_source(FILTER)
    res = analyze(prog)
    assert any("joined to every subgraph" in n for n in res.notes)
    counted = {s for a in res.arrays for s in a.statements}
    excluded = frozenset(st.name for st in prog.statements) - counted
    split, _ = expand_temporaries(split_scalars(prog)[0])
    sdg = build_sdg(split)
    free = {a for a in sdg.computed if all(st.name in excluded for st in split.writers(a))}
    assert free                                            # the 0.0 resets
    # every connected subgraph with any subset of the free arrays (the enumeration without the
    # joining), derived without the excluded statements: its ρ is below the reported max
    for H in sdg.connected_subsets(max_size=4):
        p = subgraph_problem(sdg, H, exclude=excluded)
        if not set(p.statements) or set(p.statements) <= excluded:
            continue
        it = intensity(p)
        for a in res.arrays:
            if a.array in H:
                best = [r for r in res.subgraphs if a.array in r.problem.arrays]
                for s in SAMPLE_S:
                    assert it.rho_at(s) <= max(r.rho_at(s) for r in best) * (1 + 1e-9), (H, a.array, s)
    assert res.bound != 0


def test_every_subgraph_is_evaluated_and_the_old_cap_of_4_was_too_high_on_durbin():
    """Theorem 5.1 takes the max over all subgraphs: durbin has 5 computed arrays, and its one
    5-array fusion has the largest ρ, so the bound capped at 4 arrays is above the certified one."""
    from pathlib import Path

    import sympy as sp

    from meshplan.models.soap import parse_file
    from meshplan.models.loops.program import sym
    from meshplan.solvers.soap.chi import S

    (prog,) = parse_file(str(Path(__file__).resolve().parents[2] / "examples" / "loops" / "durbin.py"))
    full, capped = analyze(prog), analyze(prog, max_subgraph=4)
    assert not any("not certified" in n for n in full.notes)
    assert any("not certified" in n for n in capped.notes)
    assert max(len(it.problem.arrays) for it in full.subgraphs) == 5
    # the SOAP pieces (Theorem 5.1 over the subgraphs; the window piece, solvers/soap/window.py, is the same
    # in both and leads at these sizes)
    soap = [sp.Add(*[a.vertices / a.rho for a in r.arrays if a.rho != sp.oo]) for r in (full, capped)]
    vals = [float(sp.N(e.subs({sym("N"): 4096, S: 1024}))) for e in soap]
    assert vals[0] < vals[1]                                   # the cap gave a bound too high
    # 7N²/(8S) since the temporaries sum and z are expanded by k (one value per step, the same CDAG)
    assert sp.simplify(leading_term(full.arrays, prog.params) - 7 * sym("N") ** 2 / (8 * S)) == 0
    assert full.leading == 3 * sym("N") ** 2 / 2               # the window's N ≫ S piece leads it
