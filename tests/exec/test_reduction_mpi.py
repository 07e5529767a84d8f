"""Synthesized reduction programs on 4 and 8 MPI ranks with exact integer results.

Each test is one ``mpiexec`` launch through the launcher users get
(:func:`meshplan.exec.reduction.driver.run_programs`), batching many programs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.reduction.driver import ProgramSpec, model_handed_bytes, run_programs
from meshplan.models.reduction.checker import replay
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.referee import run_numeric
from meshplan.models.core.system import System
from meshplan.solvers.placement.study import solve_placement

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parents[2]


def _synthesized(system: str, axes, reduce, per_placement: int):
    """Up to ``per_placement`` programs of every placement, spread over the ranking."""
    study = solve_placement(System.parse(system), axes, reduce, max_size=4)
    specs = []
    for pi, pl in enumerate(study.placements):
        progs = pl.programs
        stride = max(1, len(progs) // per_placement)
        for j in range(0, len(progs), stride)[:per_placement]:
            specs.append(ProgramSpec(f"{system}/{pi}/{j}", progs[j].lowered, pl.reduction_groups))
    return specs


def _check_valid_runs(specs, runs, k_of):
    assert [r.name for r in runs] == [s.name for s in specs]
    for s, r in zip(specs, runs):
        assert replay(s.program, s.reduction_groups).valid
        assert r.executable and r.verified, (s.name, r.reason)
        # the bytes handed to MPI per step are exactly the held chunks of the Figure 8 states
        assert [list(b) for b in r.bytes_per_step] == model_handed_bytes(s.program, k_of(s), r.chunk_bytes)
        assert len(r.step_median_s) == len(s.program.steps) and r.time_median_s >= 0


def _k(spec):
    return len(spec.reduction_groups[0])


def test_synthesized_programs_on_8_ranks_and_double_counting_fails():
    specs = (_synthesized("node=2,gpu=4", (2, 4), (1,), 12)            # two levels, one reduction axis
             + _synthesized("node=2,cpu=2,gpu=2", (2, 2, 2), (0, 2), 3))  # three levels, two reduction axes
    assert len(specs) >= 20
    groups = specs[0].reduction_groups
    double = LoweredProgram((LoweredStep("AllReduce", groups), LoweredStep("AllReduce", groups)), 8)
    bad = ProgramSpec("double-counting", double, groups)
    hand = ProgramSpec("handwritten", double, groups, impl="handwritten")
    runs = run_programs(specs + [bad, hand], np=8, nbytes=24 << 10, repeats=1, timeout_s=300)
    _check_valid_runs(specs, runs[:-2], _k)
    # Figure 4b: AllReduce twice adds every contribution twice; MPI runs it and the result is wrong
    assert not replay(double, groups).valid
    assert runs[-2].executable and not runs[-2].verified
    assert "differs from the numpy sum" in runs[-2].reason
    assert not run_numeric(double, groups, _k(bad)).correct
    assert runs[-1].verified and runs[-1].bytes_per_rank == (0,) * 8  # the baseline is not counted


def test_synthesized_programs_on_4_ranks_and_not_executable_programs():
    specs = (_synthesized("node=2,gpu=2", (2, 2), (0,), 6)              # two levels, one reduction axis
             + _synthesized("node=2,cpu=2,gpu=1", (4,), (0,), 10)       # three levels, one reduction axis
             + _synthesized("node=2,cpu=2,gpu=1", (2, 2), (0, 1), 5))   # three levels, two reduction axes
    assert len(specs) >= 20
    g = ((0, 1, 2, 3),)
    pairs = ((0, 1), (2, 3))
    # Reduce leaves non-roots empty; an AllReduce over all then passes 4 vs 0 chunks: MPI cannot run it
    stuck = ProgramSpec("unequal", LoweredProgram((LoweredStep("Reduce", pairs), LoweredStep("AllReduce", g)), 4), g)
    # like Figure 4a: after a ReduceScatter over pairs, an AllReduce over the same pairs adds chunk 0 of
    # one device to chunk 1 of the other (equal counts, so MPI runs it)
    wrong = ProgramSpec("fig4a", LoweredProgram((LoweredStep("ReduceScatter", pairs), LoweredStep("AllReduce", pairs),
                                                 LoweredStep("AllGather", pairs)), 4), pairs)
    runs = run_programs(specs + [stuck, wrong], np=4, nbytes=16 << 10, repeats=2, dtype="float32",
                        timeout_s=300)
    _check_valid_runs(specs, runs[:-2], _k)
    assert not runs[-2].executable and not runs[-2].verified
    assert "not executable" in runs[-2].reason and "different chunk counts" in runs[-2].reason
    assert runs[-1].executable and not runs[-1].verified
    assert not replay(wrong.program, pairs).valid and not run_numeric(wrong.program, pairs, 2).correct


# The example programs in examples/programs/ are written for P2's Figure 2 system (16 GPUs). Tests stay at 8 ranks, so
# they run on the same hierarchy with 2 GPUs per CPU: the level names (and so the instructions) are the
# same, the placement keeps axis 1 on server and gpu as in the files' matrix [[1,1,2,2],[1,2,1,2]].
SMALL_FIG2 = ("rack=1,server=2,cpu=2,gpu=2", (2, 4), (1,), [[1, 1, 2, 1], [1, 2, 1, 2]])
EXAMPLES = {"fig3a_allreduce": True, "fig3b_allreduce_allreduce": True, "fig3c_reduce_allreduce_broadcast": True,
            "double_count": False, "fig4a_reducescatter_allreduce": False, "fig4b_allreduce_allreduce": False}


def test_example_programs_of_figures_3_and_4_on_mpi():
    from meshplan.models.reduction.program_text import parse_program, resolve
    from meshplan.models.placement.matrix import ParallelismMatrix
    from meshplan.models.reduction.hierarchy import synthesis_hierarchy

    folder = ROOT / "examples" / "programs"
    assert all((folder / f"{n}.txt").is_file() for n in EXAMPLES)
    system, axes, reduce, rows = SMALL_FIG2
    m = ParallelismMatrix.of(System.parse(system), rows, axes)
    h = synthesis_hierarchy(m, reduce)
    groups = tuple(m.reduction_groups(reduce))
    specs = []
    for name in EXAMPLES:
        path = folder / f"{name}.txt"
        specs.append(ProgramSpec(name, resolve(parse_program(path.read_text(), source=str(path)), h), groups))
    runs = run_programs(specs, np=8, nbytes=8 << 10, repeats=1, timeout_s=300)
    for s, r in zip(specs, runs):
        want = EXAMPLES[s.name]
        assert r.verified == want, (s.name, r.reason)
        assert replay(s.program, groups).valid == want
        # MPI and the numpy referee of `meshplan check` agree
        assert run_numeric(s.program, groups, len(groups[0])).correct == r.verified
        if not want:  # MPI ran them (equal chunk counts everywhere), the numbers are wrong
            assert r.executable and r.reason, s.name
    assert "differs from the numpy sum" in runs[list(EXAMPLES).index("double_count")].reason


@pytest.mark.parametrize("kind,msg", [("raise", "injected failure"), ("hang", "timed out")])
def test_a_failing_or_hanging_rank_ends_the_whole_job_with_one_error(kind, msg):
    from meshplan.exec.runtime.launch import MpiRunError

    g = ((0, 1, 2, 3),)
    spec = ProgramSpec("ar", LoweredProgram((LoweredStep("AllReduce", g),), 4), g)
    with pytest.raises(MpiRunError, match=msg):
        run_programs([spec], np=4, nbytes=1024, repeats=1, timeout_s=8 if kind == "hang" else 60,
                     fault={"rank": 2, "kind": kind})
