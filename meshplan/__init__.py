"""meshplan — plan and prove the communication of parallel programs on hierarchical machines.

The front door (DESIGN.md): ``import meshplan as mp`` gives the curated Python API listed in
:data:`__all__`; the CLI lives in :mod:`meshplan.cli`.  Every public name is imported lazily from the
module named in :data:`_EXPORTS` on first attribute access, so ``import meshplan`` stays cheap (no z3,
sympy, OR-Tools, matplotlib or mpi4py until a function that needs them is used).  Layers:
``meshplan`` → ``exec`` → ``solvers`` → ``encodings`` → ``models``.  ``docs/api.md`` documents
every name with a runnable example.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it, one section per capability (add a name with a one-line edit)
_EXPORTS: dict[str, str] = {
    # core: errors, systems and presets
    "Infeasible": "meshplan.models.core.errors",
    "MeshplanError": "meshplan.models.core.errors",
    "ModelError": "meshplan.models.core.errors",
    "ParseError": "meshplan.models.core.errors",
    "SolverTimeout": "meshplan.models.core.errors",
    "VerificationError": "meshplan.models.core.errors",
    "System": "meshplan.models.core.system",
    "Collective": "meshplan.models.core.collectives",
    # placement: parallelism matrices over the levels of a system
    "PlacementProblem": "meshplan.models.placement.problem",
    "solve_placement": "meshplan.api.placement",
    "PlacementPlan": "meshplan.api.placement",
    "load_schedule": "meshplan.schedule",
    "Schedule": "meshplan.schedule",
    "export_mesh": "meshplan.api.export",
    "DeviceMesh": "meshplan.api.export",
    "export_mpi4py": "meshplan.api.export",
    "Mpi4pyProgram": "meshplan.api.export",
    "draw_schedule": "meshplan.plots",
    # reduction: synthesis, proof, simulation and MPI runs of reduction programs
    "synthesize": "meshplan.api.reduction",
    "ReductionProblem": "meshplan.models.reduction.problem",
    "plan_reduction": "meshplan.api.reduction_plan",
    "ReductionPlan": "meshplan.api.reduction_plan",
    "ReductionExecutor": "meshplan.exec.reduction.executor",
    "simulate": "meshplan.api.reduction",
    "check_program": "meshplan.api.reduction",
    "ProgramCheck": "meshplan.api.reduction",
    "check_schedule": "meshplan.api.reduction",
    "ScheduleCheck": "meshplan.api.reduction",
    "run_programs": "meshplan.api.reduction_run",
    "ReductionRun": "meshplan.api.reduction_run",
    "calibrate": "meshplan.api.calibration",
    "Calibration": "meshplan.api.calibration",
    # redistribution: memory-bounded redistribution of distributed arrays
    "Mesh": "meshplan.models.redistribution.mesh",
    "parse_mesh": "meshplan.models.redistribution.mesh",
    "parse_type": "meshplan.models.redistribution.types",
    "RedistributionProblem": "meshplan.models.redistribution.problem",
    "plan_redistribution": "meshplan.api.redistribution",
    "RedistributionPlan": "meshplan.api.redistribution",
    "RedistributionExecutor": "meshplan.exec.redistribution.executor",
    "RedistributionRun": "meshplan.api.redistribution",
    "run_redistribution": "meshplan.api.redistribution",
    # soap: I/O lower bounds and optimal tiles of loop programs
    "analyze_bound": "meshplan.api.soap",
    "analyze_bounds": "meshplan.api.soap",
    "BoundReport": "meshplan.api.soap",
    "integer_tiles": "meshplan.api.soap",
    # matmul: distributed matrix multiplication
    "MatmulProblem": "meshplan.models.matmul.problem",
    "plan_matmul": "meshplan.api.matmul",
    "MatmulPlan": "meshplan.api.matmul",
    "MatmulExecutor": "meshplan.exec.matmul.executor",
    "MatmulRun": "meshplan.api.matmul",
    "run_matmul": "meshplan.api.matmul",
    # factorization: distributed LU and Cholesky
    "plan_factorization": "meshplan.api.factorization",
    "FactorPlan": "meshplan.api.factorization",
    "FactorProblem": "meshplan.api.factorization",
    "FactorExecutor": "meshplan.exec.factorization.executor",
    "FactorRun": "meshplan.api.factorization",
    "run_factorization": "meshplan.api.factorization",
    # tensor: DistDL-style tensor primitives and their adjoints
    "HaloProblem": "meshplan.models.tensor.problem",
    "plan_halo": "meshplan.api.tensor",
    "HaloPlan": "meshplan.api.tensor",
    "HaloExecutor": "meshplan.exec.tensor.executor",
    "TensorRun": "meshplan.api.tensor",
    "check_tensor": "meshplan.api.tensor",
    # counting: iteration counting of loop programs
    "CountProblem": "meshplan.models.counting.problem",
    "count_iterations": "meshplan.api.counting",
    "CountPlan": "meshplan.api.counting",
    "CountRun": "meshplan.api.counting",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562) and cache it on the package."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'meshplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API and the package's own attributes (for tab completion)."""
    return sorted(set(globals()) | set(_EXPORTS))
