"""The one validation site of the parameters every capability shares: ranks and repetitions (and the one reader
of integer lists such as ``axes="4,16"``).

``np`` (or ``p``: how many MPI ranks, one per device) and ``repeats`` (timed repetitions of a measurement) are
checked here and nowhere else; ``dtype`` is checked by :func:`meshplan.models.core.dtypes.as_dtype`.  Errors
name the API parameter (``what``) and carry it as :attr:`~meshplan.models.core.errors.MeshplanError.param`, so
the CLI shows the flag that sets it.  The machine's rank limit (how many ranks one launch may start) is the
launcher's policy, :func:`meshplan.exec.runtime.launch.check_np`, which calls :func:`check_ranks` first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meshplan.models.core.errors import ModelError, quote

__all__ = ["check_ranks", "check_repeats", "as_int_tuple"]


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


def as_int_tuple(value: Any, what: str) -> tuple[int, ...]:
    """``"4,16"``, ``4`` or ``(4, 16)`` -> ``(4, 16)`` (numpy integers too); errors name ``what`` (the parameter,
    e.g. ``axes``)."""
    if isinstance(value, bool):
        raise ModelError(f"{what} must be integers, got {value!r}", param=what)
    if isinstance(value, int):
        return (value,)
    if isinstance(value, str):
        try:
            out = tuple(int(x) for x in value.replace(" ", "").split(",") if x != "")
        except ValueError:
            raise ModelError(f"{what} must be comma-separated integers, got {value!r}", param=what) from None
    else:
        try:
            items = list(value)
        except TypeError:
            raise ModelError(f"{what} must be integers like 4,16, got {value!r}", param=what) from None
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in items):
            raise ModelError(f"{what} must be integers, got {quote(value)}", param=what)
        out = tuple(int(x) for x in items)
    if not out:
        raise ModelError(f"{what} is empty", param=what)
    return out
