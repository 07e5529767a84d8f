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
