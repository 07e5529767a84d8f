"""Suite-wide test settings: hypothesis profiles and the ``slow`` marker's fast subset.

Hypothesis profiles (``pytest --hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE=NAME``):

* ``default`` — no per-example deadline (the CI machine is a shared 2-core box where one example can
  wait seconds for a core; a deadline there flags load, not a bug) and no ``too_slow`` health check;
  example counts are the tests' own (``@settings(max_examples=…)``, chosen per property).
* ``thorough`` — the same, and every property test that does not fix its own count draws 1000
  examples; for a nightly run.

``pytest -m "not slow"`` is the fast subset (README, *Quick start*): it leaves out the tests marked
``@pytest.mark.slow`` (each over ~10 s on a 2-core machine) and still runs every verb's CLI tests.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
