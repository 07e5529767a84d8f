"""A factorization that breaks down: a singular matrix (LU) or one that is not symmetric positive definite
(Cholesky), named by the step and block column where it happened (thesis 4.7.3, 4.7.5).

COnfLUX's tournament (section 4.7.3) finds no pivot above ``N·ε·max|A|`` in its final GEPP; COnfCHOX's
diagonal block has a non-positive pivot.  Both are a property of the matrix, not of the run, so they are
raised as :class:`FactorizationBreakdown` (a :class:`~meshplan.models.core.errors.VerificationError`, exit
code 1) with the same message on every rank and in the launcher.
"""

from __future__ import annotations

from meshplan.models.core.errors import VerificationError

__all__ = ["FactorizationBreakdown", "breakdown"]


class FactorizationBreakdown(VerificationError):
    """The matrix is singular (LU) or not positive definite (Cholesky); ``step``, ``block`` (the block
    column ``[c0, c1)``) and ``column`` say where, ``detail`` is the message without the problem prefix."""

    def __init__(self, message: str, *, step: int, column: int, block: tuple[int, int], detail: str) -> None:
        super().__init__(message)
        self.step, self.column, self.block, self.detail = step, column, tuple(block), detail


def breakdown(kind: str, N: int, v: int, step: int, k: int) -> FactorizationBreakdown:
    """The error of step ``step`` (block column ``[step·v, min(step·v+v, N))``) breaking down at its
    ``k``-th column."""
    c0 = step * v
    c1 = min(c0 + v, N)
    what = "singular to working precision" if kind == "lu" else "not symmetric positive definite"
    detail = f"the matrix is {what}: step {step} (block column [{c0}, {c1})) broke down at column {c0 + k}"
    name = "LU" if kind == "lu" else "Cholesky"
    return FactorizationBreakdown(f"{name} of N = {N}: {detail}", step=step, column=c0 + k, block=(c0, c1),
                                  detail=detail)
