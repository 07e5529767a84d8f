"""The z3 proof that a lowered reduction program computes exactly the requested sums.

Runs :func:`meshplan.encodings.reduction_proof.encode_reduction_proof` through
the z3 backend.  ``unsat`` over unbounded integers is the proof; otherwise
the query is repeated with every input in ``0..9`` to print a small concrete
counterexample (a linear form that is not identically zero is non-zero
somewhere on that box, so the bounded query is satisfiable whenever the
unbounded one is) and the outputs it makes wrong.  Independent of the state
rules of P2 Figure 8 (docs/check.md, "three referees").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from meshplan.encodings.reduction_proof import encode_reduction_proof
from meshplan.models.reduction.checker import chunks_for
from meshplan.models.reduction.lowering import LoweredProgram
from meshplan.solvers.backend import Status, get_backend

__all__ = ["ProofResult", "Counterexample", "WrongOutput", "prove", "referees_agree"]

SMALL = 9


@dataclass(frozen=True, slots=True)
class WrongOutput:
    device: int
    chunk: int
    got: int
    expected: int
    #: the output as a sum: ``(input device, input chunk, coefficient)`` (1 = counted once)
    terms: tuple[tuple[int, int, int], ...] = ()
    #: the device's reduction group: the expected output is the sum of its chunk over these devices
    group: tuple[int, ...] = ()

    def __str__(self) -> str:
        return f"device {self.device}, chunk {self.chunk}: got {self.got}, expected {self.expected}"


@dataclass(frozen=True, slots=True)
class Counterexample:
    """Inputs ``inputs[(device, chunk)]`` on which the program computes ``wrong``."""

    inputs: dict = field(hash=False)
    wrong: tuple[WrongOutput, ...]


@dataclass(frozen=True, slots=True)
class ProofResult:
    """``status``: ``proved``, ``refuted`` or ``unknown`` (solver gave up)."""

    status: str
    reason: str
    counterexample: Counterexample | None = None
    step: int | None = None  # step that cannot run (layout failure)
    seconds: float = 0.0

    @property
    def proved(self) -> bool:
        return self.status == "proved"


def _coefficients(term: str, defs: dict, memo: dict) -> dict[tuple[int, int], int]:
    """``{(device, chunk): coefficient}`` of a term of the encoding (a symbol or a defined sum)."""
    if term in memo:
        return memo[term]
    if term in defs:
        out: dict[tuple[int, int], int] = {}
        for part in defs[term]:
            for key, c in _coefficients(part, defs, memo).items():
                out[key] = out.get(key, 0) + c
    else:
        _, d, r = term.split("_")
        out = {(int(d), int(r)): 1}
    memo[term] = out
    return out


def prove(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], chunks: int | None = None, *,
          time_limit_s: float | None = 60.0, counterexample: bool = True) -> ProofResult:
    """Prove with z3 that ``program`` leaves on every device the sum over exactly its group."""
    k = chunks if chunks is not None else chunks_for(reduction_groups)
    enc = encode_reduction_proof(program, reduction_groups, k)
    lay = enc.meta["layout_failure"]
    if lay is not None:
        return ProofResult("refuted", lay.detail, step=lay.step)
    backend = get_backend("z3")
    sol = backend.solve(enc, time_limit_s=time_limit_s)
    if sol.status is Status.INFEASIBLE:
        return ProofResult("proved", "z3 proves every device ends with the sum over exactly its reduction "
                                     "group, for all inputs", seconds=sol.seconds)
    if not sol.status.has_solution:
        return ProofResult("unknown", f"z3 gave no answer ({sol.status.value})", seconds=sol.seconds)
    if not counterexample:
        return ProofResult("refuted", "z3 finds inputs on which the program computes a wrong sum",
                           seconds=sol.seconds)
    # the witness: z3's model, inside 0..SMALL, for the first output (device order) that is not the
    # right sum as a polynomial; the unbounded query above already refuted the program
    defs, memo = enc.meta["definitions"], {}
    forms = {key: (_coefficients(out, defs, memo), _coefficients(enc.meta["targets"][key], defs, memo))
             for key, out in enc.meta["outputs"].items()}
    first_key = next((key for key, (have, want) in forms.items() if have != want), None)
    if first_key is None:  # pragma: no cover - would mean z3 and the term expansion disagree
        return ProofResult("unknown", "z3 found a model, but every output is the right sum as a polynomial",
                           seconds=sol.seconds)
    small = backend.solve(encode_reduction_proof(program, reduction_groups, k, bound=SMALL, only=first_key),
                          time_limit_s=time_limit_s)
    chosen = small if small.status.has_solution else sol
    inputs = enc.decode(chosen.values)
    group_of = {d: tuple(g) for g in reduction_groups for d in g}
    wrong = []
    for key, (have, want) in forms.items():
        got = sum(c * inputs[x] for x, c in have.items())
        exp = sum(c * inputs[x] for x, c in want.items())
        if got != exp:
            terms = tuple((d, r, c) for (d, r), c in sorted(have.items()))
            wrong.append(WrongOutput(key[0], key[1], got, exp, terms, group_of.get(key[0], (key[0],))))
    wrong.sort(key=lambda w: (w.device, w.chunk) != first_key)
    first = wrong[0]
    group = first.group
    return ProofResult("refuted", f"on a concrete input device {first.device} ends with {first.got} in chunk "
                                  f"{first.chunk}, but the sum over its reduction group {list(group)} is "
                                  f"{first.expected}", Counterexample(inputs, tuple(wrong)),
                       seconds=sol.seconds + small.seconds)


def referees_agree(verdict, numeric_correct: bool, proof_status: str | None) -> tuple[bool, str]:
    """The agreement relation of docs/check.md ("three referees").

    * z3 and numpy must give the same answer (both run the buffer model);
    * replay valid ⇒ numbers right; replay short at the end (all premises held) ⇒ numbers wrong;
    * a rule failure on a program whose numbers are right is allowed only for R-BROADCAST, whose
      premises (information increase) are an optimization, not a correctness condition (P2 §3.2).
    """
    if proof_status is not None and proof_status != "unknown" and (proof_status == "proved") != numeric_correct:
        return False, "z3 and numpy disagree"
    if verdict.valid:
        return (True, "") if numeric_correct else (False, "the rules accept a program whose numbers are wrong")
    if verdict.failure is None:
        return (True, "") if not numeric_correct else (False, "the rules' final state falls short but the "
                                                             "numbers are right")
    if not numeric_correct:
        return True, ""
    if verdict.failure.rule == "R-BROADCAST":
        return True, ("the program computes the right sums: only Broadcast's information-increase premise "
                      "fails, an optimization of P2 Figure 8 (docs/check.md); the program is still invalid")
    return False, (f"the program computes the right sums although the {verdict.failure.rule} premise "
                   f"“{verdict.failure.premise}” fails")
