"""Re-export of the error hierarchy (defined in :mod:`meshplan.models.errors`)."""

from meshplan.models.errors import (  # noqa: F401
    Infeasible,
    MeshplanError,
    ModelError,
    ParseError,
    SolverTimeout,
    VerificationError,
)

__all__ = ["MeshplanError", "ModelError", "ParseError", "Infeasible", "SolverTimeout", "VerificationError"]
