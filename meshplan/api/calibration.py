"""Measure this machine on MPI and fit a system file for the simulator (P2 §5; docs/calibrate.md).

:func:`calibrate` is ``meshplan calibrate``: point-to-point latency and bandwidth per level (idle and
loaded) and the time of each collective, fitted into the interconnects of a :class:`System`, so
``solve placement --system FILE`` simulates times comparable with ``run``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from meshplan.api.inputs import as_bytes, as_seconds, as_system
from meshplan.models.core.values import Value, freeze, library_field, optional_field, value
from meshplan.models.core.errors import ModelError
from meshplan.models.core.limits import check_memory

__all__ = ["Calibration", "calibrate", "default_shape"]


def default_shape(np: int) -> str:
    """The system shape measured when none is given: ``node=2,gpu=N/2`` (even N ≥ 4) or ``gpu=N``."""
    return f"node=2,gpu={np // 2}" if np >= 4 and np % 2 == 0 else f"gpu={np}"


@value
class Calibration(Value):
    """The fitted system file (docs/formats.md: ``name`` and ``description`` when set, ``levels`` with the
    interconnects carrying the loaded measurements) with its ``calibration`` section (per level: idle, loaded
    and fitted latency/bandwidth; per collective: measured vs simulated).  :meth:`to_json` is the
    ``calibrate --json`` document; ``system`` holds the fitted :class:`~meshplan.models.core.system.System`."""

    name: str | None = optional_field(required=True)
    description: str | None = optional_field(required=True)
    levels: tuple
    calibration: Mapping
    #: the measured f64 matrix-multiply rate of one rank while all compute (flop/s; the time models' γ)
    flop_rate: float | None = optional_field()
    #: seconds one synchronisation of busy ranks costs, per rank count (``{"4": 0.002}``; the latency per
    #: message of the factorization time model)
    sync_latency: Mapping | None = optional_field()
    #: the inner dimension at which a matrix multiply runs at half ``flop_rate`` (a rank-``k`` update runs at
    #: ``flop_rate·k/(k + gemm_half_k)``; the factorization time model's rate at block ``v``)
    gemm_half_k: float | None = optional_field()
    system: Any = library_field()

    def save(self, path: str | Path) -> Path:
        """Write the system file to ``path`` (the input of ``--system FILE``)."""
        from meshplan.models.core.outputs import write_output

        return write_output(path, json.dumps(self.to_json(), indent=1) + "\n", what="system file")


def calibrate(np: int | None = None, *, system: Any = None, bytes: Any = None, repeats: int = 5,
              timeout: float = 300.0, progress: Any = None, testbed: bool = False) -> Calibration:
    """Measure on ``np`` MPI ranks (rank r = device r of ``system``, default :func:`default_shape`; ``np``
    defaults to the system's devices) with messages up to ``bytes`` (a sweep of sizes ending there) and
    ``repeats`` timed repetitions (median; ``bytes`` defaults to 1MiB, 16MiB on the testbed, where the shaped
    links, not the shared cores, should set the times); interconnects given in ``system`` are replaced by the
    measurements.  ``testbed=True`` measures across the nodes of the testbed that is up (docs/testbed.md):
    the system's outer levels must be its nodes (and racks)."""
    import contextlib

    from meshplan.exec.reduction.calibrate import calibrate as _calibrate

    from meshplan.models.core.checks import check_ranks, check_repeats

    if np is None and system is None:
        raise ModelError("give np or system (the devices to measure)", param=("np", "system"))
    if np is None:
        np = as_system(system).num_devices
    if check_ranks(np, "np") < 2:
        raise ModelError(f"np must be at least 2 to measure anything, got {np}", param="np")
    shape = as_system(system if system is not None else default_shape(np))
    if shape.num_devices != np:
        raise ModelError(f"system {shape.short()} has {shape.num_devices} devices but np is {np}; "
                         "one rank per device", param=("system", "np"))
    nbytes = as_bytes(bytes if bytes is not None else "16MiB" if testbed else "1MiB", "bytes")
    if nbytes < 64:
        raise ModelError(f"bytes must be at least 64, got {nbytes}", param="bytes")
    check_repeats(repeats)
    check_memory(2 * nbytes * np, f"calibrating with bytes={bytes} on {np} ranks (a send and a receive buffer "
                 "each)", "use a smaller bytes")
    timeout = as_seconds(timeout, "timeout")
    where = contextlib.nullcontext()
    if testbed:
        from meshplan.exec.testbed import on_testbed

        where = on_testbed(np, shape)
    with where:
        res = _calibrate(shape, nbytes=nbytes, iters=repeats, timeout_s=timeout, progress=progress)
    doc = res["system"].to_dict()
    return Calibration(doc.get("name"), doc.get("description"), freeze(doc["levels"]), freeze(res["calibration"]),
                       doc.get("flop_rate"), freeze(doc["sync_latency"]) if "sync_latency" in doc else None,
                       doc.get("gemm_half_k"), system=res["system"])
