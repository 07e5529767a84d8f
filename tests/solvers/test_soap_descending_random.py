"""Random SOAP programs with descending loops (``range(hi - 1, lo - 1, -1)``): the bound stays at most the
I/O of the tool's own legal schedule, replayed in the program's own order of iterations.  Programs with a
statement that reads nothing (``C[i] = 1.0``) are left to the constant-chain tests: chains of constants
and partial overwrites are another rule of the bound, whatever the loops' direction."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from meshplan.api.soap import report_json, schedule_json
from meshplan.models.core.errors import ModelError
from meshplan.models.soap import parse_source
from meshplan.solvers.soap.bound import analyze

_LOOP = re.compile(r"range\(([^,()]+), ([^,()]+)\):")


def _descending(src: str, flips: list[bool]) -> str:
    """``src`` with the loops picked by ``flips`` (in order of appearance) turned descending."""
    it = iter(flips)
    return _LOOP.sub(lambda m: f"range({m[2]} - 1, {m[1]} - 1, -1):" if next(it, False) else m[0], src)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(data=st.data(), memory=st.integers(8, 24))
def test_bound_below_the_tools_schedule(soap_programs, data, memory):
    src = data.draw(soap_programs)
    assume("1.0" not in src)
    src = _descending(src, data.draw(st.lists(st.booleans(), min_size=9, max_size=9)))
    (p,) = parse_source(src)
    try:
        res = analyze(p)
    except ModelError:
        return
    values = {"N": 6, "M": 5, "S": memory}
    doc = report_json(res, values, tiles=True, time_limit_s=0.3)
    sc = schedule_json(p, doc, values)
    assert doc["values"]["bound"] <= sc["total"] * (1 + 1e-9), src
