"""Data flow the SOAP model must not lose or invent (thesis sections 5.5.2 and 5.5.4).

Each case is a program whose bound once went wrong, checked against the exact I/O of a schedule
replayed through an LRU fast memory (models/soap/replay.py): a bound above attained I/O is a bug.
"""

from __future__ import annotations

from meshplan.api.soap import report_json, schedule_json
from meshplan.models.loops.frontend import parse_source
from meshplan.models.soap.access import components
from meshplan.solvers.soap.bound import analyze


def _bound_and_attained(src: str, values: dict[str, int]):
    (p,) = parse_source(src)
    res = analyze(p)
    doc = report_json(res, values, tiles=True, time_limit_s=0.3)
    sc = schedule_json(p, doc, values)
    return max(doc["values"]["bound"], doc["values"]["bound_numeric"]), sc["total"], res


SELF_READ = """
def f(N):
    for i in range(N):
        for j in range(N):
            for k in range(N):
                A[i] += A[j]
"""


def test_a_self_read_of_another_element_has_no_version_along_inner_loops():
    """``A[i] += A[j]``: between two steps of ``k`` only ``A[i]`` is rewritten, so ``A[j]`` is one
    vertex for every ``k`` (hypothesis found the bound N³/S = 27 above the 12 words program order
    moves at N = 6, S = 8, where A fits in fast memory)."""
    (p,) = parse_source(SELF_READ)
    comps = components(p, p.statements[0], 0)
    (read,) = [c for c in comps if c.role == "self" and c.vars == ("j",)]
    assert read.version == ()
    assert [c for c in comps if c.role == "out"][0].version == ("j", "k")
    bound, attained, res = _bound_and_attained(SELF_READ, {"N": 6, "S": 8})
    assert bound <= attained == 12
    assert str(res.leading) == "N"


def _example(name: str):
    from pathlib import Path

    from meshplan.models.loops.frontend import parse_file

    (p,) = parse_file(str(Path(__file__).resolve().parents[2] / "examples" / "loops" / f"{name}.py"))
    return p


def test_doitgen_temporary_is_expanded_and_the_batched_product_is_found():
    """``acc[pp]`` is reset for every ``(r, q)``: expanded to ``acc[pp, r, q]`` (the same CDAG), the
    kernel is the batched matrix product of the published entry ``2·NP²·NQ·NR/√S``."""
    import sympy as sp

    from meshplan.models.loops.program import sym
    from meshplan.models.soap.expand import expand_temporaries
    from meshplan.solvers.soap.chi import S

    p = _example("doitgen")
    new, notes = expand_temporaries(p)
    assert [str(a) for st in new.statements for a in (st.output, *st.inputs) if a.array == "acc"][0] == "acc[pp, r, q]"
    assert notes and "acc" in notes[0]
    lead = analyze(p).leading
    NP, NQ, NR = sym("NP"), sym("NQ"), sym("NR")
    assert sp.simplify(lead - 2 * NP ** 2 * NQ * NR / sp.sqrt(S)) == 0


def test_a_value_carried_across_iterations_is_neither_expanded_nor_split():
    """durbin's ``alpha`` is reset in step ``k`` and read in step ``k + 1``; deriche's ``xm1`` is reset
    before a row and at the end of each step, so a read sees two chains: both keep their names."""
    from meshplan.models.soap.expand import expand_temporaries
    from meshplan.models.soap.scalars import split_scalars

    d = _example("durbin")
    new, _ = expand_temporaries(split_scalars(d)[0])
    shapes = {a.array: len(a.index) for st in new.statements for a in (st.output, *st.inputs)}
    assert shapes["alpha"] == 0 and shapes["sum"] == 1 and shapes["z"] == 2
    der, notes = split_scalars(_example("deriche"))
    assert "xm1" in der.arrays and not any(n.startswith("scalar xm1") for n in notes)


def test_an_internal_read_the_tile_does_not_compute_is_paid_for():
    """gramschmidt's ``Q[i, k] = A[i, k]/R[k, k]`` reads column ``k`` of ``A``, which the fused update
    ``A[i, j] -= …`` computes only where its ``j`` range covers ``k``: the bound's leading term is
    of the √S type now (it was ``MN²/(3S)``: the read was free), and still below the attained I/O.  Within one
    step ``k`` the update writes only the columns ``j > k``: the read is a second array (LU's treatment)."""
    import sympy as sp

    from meshplan.solvers.soap.chi import S

    res = analyze(_example("gramschmidt"))
    assert S not in sp.simplify(res.leading * sp.sqrt(S)).free_symbols
    notes = [n for it in res.subgraphs for n in it.problem.notes]
    # paid for as a second array: within one step k the update writes only columns j > k (section 5.5.1)
    assert any("A[i_2, k]" in n and "a second array (section 5.5.1, as for LU)" in n for n in notes)
