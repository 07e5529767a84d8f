"""OR-Tools CP-SAT behind the :class:`~meshplan.solvers.backends.base.Backend` protocol."""

from __future__ import annotations

import time
from typing import Iterator

from meshplan.encodings.core.base import Encoded
from meshplan.models.core.errors import ModelError
from meshplan.solvers.backends.base import Solution, Status

__all__ = ["CpSatBackend"]


class CpSatBackend:
    """OR-Tools CP-SAT behind the :class:`~meshplan.solvers.backends.base.Backend` protocol."""

    name = "cpsat"
    library = "cpsat"

    def is_available(self) -> bool:
        """Whether OR-Tools can be imported."""
        try:
            import ortools.sat.python.cp_model  # noqa: F401
        except ImportError:
            return False
        return True

    def _solver(self, time_limit_s: float | None, workers: int):
        from ortools.sat.python import cp_model

        solver = cp_model.CpSolver()
        if time_limit_s is not None:
            solver.parameters.max_time_in_seconds = float(time_limit_s)
        solver.parameters.num_workers = workers
        solver.parameters.catch_sigint_signal = False  # Ctrl-C is Python's: see _interruptible
        return solver

    def _check(self, encoded: Encoded) -> None:
        if encoded.library != self.library:
            raise ModelError(f"backend cpsat cannot solve a {encoded.library} model")

    def solve(self, encoded: Encoded, *, time_limit_s: float | None = None) -> Solution:
        """One optimal (or feasible, at the time limit) answer of a CP-SAT model."""
        from ortools.sat.python import cp_model

        self._check(encoded)
        solver = self._solver(time_limit_s, workers=2)
        t0 = time.perf_counter()
        st = _interruptible(solver, encoded.model)
        secs = time.perf_counter() - t0
        status = {
            cp_model.OPTIMAL: Status.OPTIMAL,
            cp_model.FEASIBLE: Status.FEASIBLE,
            cp_model.INFEASIBLE: Status.INFEASIBLE,
        }.get(st, Status.UNKNOWN)
        if st == cp_model.UNKNOWN and time_limit_s is not None and secs >= 0.95 * time_limit_s:
            status = Status.TIMEOUT
        if not status.has_solution:
            return Solution(status, seconds=secs)
        values = {n: solver.value(v) for n, v in encoded.variables.items()}
        obj = solver.objective_value if encoded.objective is not None else None
        return Solution(status, values, obj, secs)

    def enumerate(self, encoded: Encoded, *, time_limit_s: float | None = None,
                  limit: int | None = None) -> Iterator[Solution]:
        """All solutions of a satisfaction model (CP-SAT's enumerate_all_solutions)."""
        from ortools.sat.python import cp_model

        self._check(encoded)
        found: list[dict[str, int]] = []
        names = list(encoded.variables)
        vars_ = [encoded.variables[n] for n in names]

        class _Collect(cp_model.CpSolverSolutionCallback):
            def __init__(self) -> None:
                super().__init__()

            def on_solution_callback(self) -> None:
                found.append({n: self.value(v) for n, v in zip(names, vars_)})
                if limit is not None and len(found) >= limit:
                    self.stop_search()

        solver = self._solver(time_limit_s, workers=1)
        solver.parameters.enumerate_all_solutions = True
        t0 = time.perf_counter()
        st = _interruptible(solver, encoded.model, _Collect())
        secs = time.perf_counter() - t0
        if st == cp_model.UNKNOWN and not found:
            yield Solution(Status.TIMEOUT if time_limit_s else Status.UNKNOWN, seconds=secs)
            return
        for values in found:
            yield Solution(Status.FEASIBLE, values, None, secs)


def _interruptible(solver, model, callback=None):
    """``solver.solve(model, callback)`` in a worker thread while the main thread waits, so Ctrl-C reaches
    Python at once: the search is stopped and ``KeyboardInterrupt`` propagates (the CLI reports it, exit 130).
    CP-SAT's own SIGINT catching is off — it would end the search early and return its best answer as if the
    search had finished, so an interrupted command would print a result and exit 0."""
    import threading

    args = (model,) if callback is None else (model, callback)
    if threading.current_thread() is not threading.main_thread():
        return solver.solve(*args)
    out: dict = {}
    done = threading.Event()

    def work() -> None:
        try:
            out["status"] = solver.solve(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            out["error"] = err
        finally:
            done.set()

    threading.Thread(target=work, name="cp-sat", daemon=True).start()
    try:
        while not done.wait(0.05):  # an Event, not join(): a join interrupted by Ctrl-C stops waiting for good
            pass
    except KeyboardInterrupt:
        solver.stop_search()
        done.wait()
        raise
    if "error" in out:
        raise out["error"]
    return out["status"]
