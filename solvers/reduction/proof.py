"""The z3 proof that a lowered reduction program computes exactly the requested sums.

Runs :func:`meshplan.encodings.reduction.proof.encode_reduction_proof` through
the z3 backend.  ``unsat`` over unbounded integers is the proof; otherwise
the query is repeated with every input in ``0..9`` to print a small concrete
counterexample (a linear form that is not identically zero is non-zero
somewhere on that box, so the bounded query is satisfiable whenever the
unbounded one is) and the outputs it makes wrong.  Independent of the state
rules of P2 Figure 8 (docs/check.md, "three referees").

:func:`referees_agree` is the agreement relation of the three referees and
:func:`check_program` runs all of them on one program (what ``meshplan check``
reports).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from meshplan.encodings.reduction.proof import ProofInfo, encode_reduction_proof
from meshplan.models.reduction.checker import Crossing, Verdict, chunks_for, first_crossing, replay
from meshplan.models.reduction.lowering import LoweredProgram
from meshplan.models.reduction.referee import Damage, NumericResult, first_damage, run_numeric
from meshplan.models.reduction.simulator import simulate
from meshplan.solvers.backends.base import Status, get_backend

__all__ = ["ProofResult", "Counterexample", "WrongOutput", "prove", "referees_agree", "CheckResult", "check_program"]

SMALL = 9


@dataclass(frozen=True, slots=True)
class WrongOutput:
    """One output of a refuted program: what it computed, what it should, and as which sum."""

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

    status: Literal["proved", "refuted", "unknown"]
    reason: str
    counterexample: Counterexample | None = None
    step: int | None = None  # step that cannot run (layout failure)
    seconds: float = 0.0

    @property
    def proved(self) -> bool:
        """Whether z3 proved the program right for every input."""
        return self.status == "proved"


def _coefficients(term: str, info: ProofInfo, memo: dict) -> dict[tuple[int, int], int]:
    """``{(device, chunk): coefficient}`` of a term of the encoding (an input symbol or a defined sum).

    Iterative (a program of 10,000 steps defines sums 10,000 deep; recursion would overflow the stack)."""
    todo = [term]
    while todo:
        t = todo[-1]
        if t in memo:
            todo.pop()
            continue
        if t not in info.definitions:
            memo[t] = {info.symbols[t]: 1}
            todo.pop()
            continue
        parts = [p for p in info.definitions[t] if p not in memo]
        if parts:
            todo.extend(parts)
            continue
        out: dict[tuple[int, int], int] = {}
        for part in info.definitions[t]:
            for key, c in memo[part].items():
                out[key] = out.get(key, 0) + c
        memo[t] = out
        todo.pop()
    return memo[term]


def prove(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], chunks: int | None = None, *,
          time_limit_s: float | None = 60.0, counterexample: bool = True) -> ProofResult:
    """Prove with z3 that ``program`` leaves on every device the sum over exactly its group."""
    k = chunks if chunks is not None else chunks_for(reduction_groups)
    enc = encode_reduction_proof(program, reduction_groups, k)
    info: ProofInfo = enc.meta
    lay = info.layout_failure
    if lay is not None:
        detail = lay.detail
        if lay.device is not None and info.final_buffers is not None:
            # it ran, but a device ends with the wrong chunks: show what it holds
            memo: dict = {}
            final = info.final_buffers[lay.device]
            sums = [f"chunk {lab} = " + " + ".join((f"{c}·" if c != 1 else "") + f"x[{d}][{r}]" for (d, r), c
                                                   in sorted(_coefficients(term, info, memo).items()))
                    for lab, term in final[:4]]
            if sums:
                detail += "; it holds " + ", ".join(sums) + (", …" if len(final) > 4 else "")
        return ProofResult("refuted", detail, step=lay.step)
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
    memo = {}
    forms = {key: (_coefficients(out, info, memo), _coefficients(info.targets[key], info, memo))
             for key, out in info.outputs.items()}
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


_NOT_RUN = object()


def referees_agree(verdict, numeric_correct: bool, proof_status: str | None,
                   damage=_NOT_RUN) -> tuple[bool, str]:
    """The agreement relation of docs/check.md ("three referees"): ``(agree, note)``.

    ``verdict`` is the replay's, ``numeric_correct`` numpy's, ``proof_status`` z3's (``None`` when not
    run) and ``damage`` :func:`meshplan.models.reduction.referee.first_damage` (omit it to skip the
    step-level conditions).

    * z3 and numpy give the same final answer (both run the buffer model);
    * replay valid ⇒ numbers right and no step damages data; replay short at the end (every premise
      held) ⇒ numbers wrong and no step damages data;
    * a failed premise of AllReduce, ReduceScatter, AllGather or Reduce at step ``i`` over group ``g``
      ⇔ the first damage is at step ``i`` in group ``g`` (the step counts a contribution twice, mixes
      chunks, duplicates a chunk or cannot run);
    * a failed R-BROADCAST premise at step ``i``: no damage before step ``i`` (a Broadcast only copies;
      its premises are P2's information-increase optimization).

    A rule failure with right final numbers is thus allowed: for R-BROADCAST, or when the damaged data
    of step ``i`` is discarded by later steps. The note says which.
    """
    check_steps = damage is not _NOT_RUN
    if proof_status is not None and proof_status != "unknown" and (proof_status == "proved") != numeric_correct:
        return False, "z3 and numpy disagree"
    if verdict.valid or verdict.failure is None:
        if verdict.valid != numeric_correct:
            return False, ("the rules accept a program whose numbers are wrong" if verdict.valid else
                           "the rules' final state falls short but the numbers are right")
        if check_steps and damage is not None:
            return False, f"every premise holds, but the buffer model finds damage at {damage}"
        return True, ""
    f = verdict.failure
    if f.rule == "R-BROADCAST":
        if check_steps and damage is not None and damage.step < f.step:
            return False, f"the buffer model finds damage at {damage} before the failing Broadcast"
        if numeric_correct:
            return True, ("the program computes the right sums: only Broadcast's information-increase premise "
                          "fails, an optimization of P2 Figure 8 (docs/check.md); the program is still invalid")
        return True, ""
    if check_steps and (damage is None or (damage.step, damage.group) != (f.step, tuple(f.group))):
        where = "no step" if damage is None else str(damage)
        return False, f"the {f.rule} premise fails at step {f.step}, but the buffer model damages data at {where}"
    if numeric_correct:
        return True, (f"the program computes the right sums although step {f.step} does damage"
                      + (f" ({damage.detail})" if check_steps else "")
                      + ": later steps discard the damaged data; the rules reject the step itself "
                        "(docs/check.md), so the program is invalid")
    return True, ""


@dataclass(frozen=True)
class CheckResult:
    """The three verdicts on one lowered program, and how they relate."""

    verdict: Verdict
    proof: ProofResult | None
    numeric: NumericResult
    chunks: int
    time_s: float | None
    agree: bool
    note: str
    crossing: Crossing | None = None  # explains extra contributions
    damage: Damage | None = None  # the first step the buffer model finds wrong data

    @property
    def valid(self) -> bool:
        """The replay's verdict: whether the program is valid."""
        return self.verdict.valid


def check_program(system, lowered, reduction_groups: Sequence[Sequence[int]], *, bytes_per_device: int = 2**30,
                  algo: str = "ring", proof: bool = True) -> CheckResult:
    """What ``meshplan check`` reports on one lowered program: the replay's verdict, the z3 proof (unless
    ``proof=False``), the numpy run, the first damaging step, the simulated time when valid, the
    first cross-group step when contributions are extra, and whether the referees agree."""
    k = chunks_for(reduction_groups)
    verdict = replay(lowered, reduction_groups, k)
    numeric = run_numeric(lowered, reduction_groups, k)
    pr = prove(lowered, reduction_groups, k) if proof else None
    time_s = None
    if verdict.valid:
        time_s = simulate(system, lowered, bytes_per_device=bytes_per_device, chunks=k, algo=algo).time_s
    damage = first_damage(lowered, k)
    agree, note = referees_agree(verdict, numeric.correct, pr.status if pr else None, damage)
    crossing = None
    if verdict.failure is None and any(s.extra for s in verdict.shortfalls):
        crossing = first_crossing(lowered, reduction_groups, k)
    return CheckResult(verdict, pr, numeric, k, time_s, agree, note, crossing, damage)
