"""Suite-wide test settings: hypothesis profiles and the ``slow`` marker's fast subset.

Hypothesis profiles (``pytest --hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE=NAME``):

* ``default`` — no per-example deadline (the CI machine is a shared 2-core box where one example can
  wait seconds for a core; a deadline there flags load, not a bug), no ``too_slow`` health check, and
  derandomized: each test draws the same examples on every run, so a red CI run reproduces and a green
  one means the same code passes the same cases. Example counts are the tests' own
  (``@settings(max_examples=…)``, chosen per property).
* ``fuzz`` — the same but random: every run draws new examples (``--hypothesis-seed=N`` replays one).
  This is how the property tests look for new failures; each one found becomes a plain test.
* ``thorough`` — ``fuzz``, and every property test that does not fix its own count draws 1000
  examples; for a nightly run.

``pytest -m "not slow"`` is the fast subset (README, *Quick start*): it leaves out the tests marked
``@pytest.mark.slow`` (each over ~10 s on a 2-core machine) and still runs every verb's CLI tests.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("fuzz", parent=settings.get_profile("default"), derandomize=False)
settings.register_profile("thorough", parent=settings.get_profile("fuzz"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _final_memory(trace, order):
    """Final memory when every statement writes a hash of (its index, the values it reads): two orders of a
    trace compute the same when these are equal."""
    mem, m = {}, (1 << 61) - 1
    for n in order.tolist():
        acc = int(trace.stmt[n]) + 7
        for e, w in zip(trace.elems[n].tolist(), trace.is_write[n].tolist()):
            if e < 0:
                continue
            if w:
                mem[e] = acc
            else:
                acc = (acc * 1000003 + mem.get(e, e * 31 + 1)) % m
    return mem


@pytest.fixture(scope="session")
def final_memory():
    """``final_memory(trace, order)``: the final memory of executing ``order`` of a replay trace."""
    return _final_memory
