"""The one validation site of the parameters every capability shares: ranks and repetitions.

``np`` (or ``p``: how many MPI ranks, one per device) and ``repeats`` (timed repetitions of a measurement) are
checked here and nowhere else; ``dtype`` is checked by :func:`meshplan.models.core.dtypes.as_dtype`.  Errors
name the API parameter (``what``) and carry it as :attr:`~meshplan.models.core.errors.MeshplanError.param`, so
the CLI shows the flag that sets it.  The machine's rank limit (how many ranks one launch may start) is the
launcher's policy, :func:`meshplan.exec.runtime.launch.check_np`, which calls :func:`check_ranks` first.
"""

from __future__ import annotations

from typing import Any

from meshplan.models.core.errors import ModelError, quote

__all__ = ["check_ranks", "check_repeats"]


def check_ranks(value: Any, what: str = "np") -> int:
    """A number of ranks: a whole number ≥ 1 (and at most the ``devices`` limit); returns it."""
    from meshplan.models.core.limits import check_limit

    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"{what} must be a whole number of ranks, at least 1, got {quote(value)}", param=what)
    check_limit("devices", value, what, param=what)
    return int(value)


def check_repeats(value: Any, what: str = "repeats") -> int:
    """A number of timed repetitions: a whole number ≥ 1 and at most the ``repeats`` limit; returns it.  Zero
    is refused everywhere: a measurement with no timed run has no time to report."""
    from meshplan.models.core.limits import check_limit

    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"{what} must be a whole number of timed runs, at least 1, got {quote(value)}",
                         param=what)
    check_limit("repeats", value, what, param=what)
    return int(value)
