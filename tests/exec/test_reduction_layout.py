"""Chunk-layout bookkeeping of the MPI lowering (no MPI): against Figure 8 and the numpy referee."""

from __future__ import annotations

import pytest

from meshplan.models.core.dtypes import RUNNABLE, as_dtype
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.exec.reduction.driver import (NotExecutable, chunk_elements, chunk_layouts, gather_order,
                                     model_handed_bytes)
from meshplan.models.core.errors import ModelError
from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.reduction.dsl import instructions
from meshplan.models.reduction.hierarchy import synthesis_hierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep, lower, lower_instruction
from meshplan.models.reduction.referee import NotExecutable as RefereeNotExecutable
from meshplan.models.reduction.referee import execute
from meshplan.models.reduction.semantics import RuleViolation, apply_step
from meshplan.models.reduction.state import initial_context, rows
from meshplan.models.core.system import System

CASES = [  # (system, matrix, reduce)
    ("node=2,gpu=4", [[1, 2], [2, 2]], [1]),
    ("node=2,cpu=2,gpu=2", [[1, 1, 2], [2, 1, 1], [1, 2, 1]], [0, 2]),
    ("rack=1,server=2,cpu=2,gpu=4", [[1, 1, 2, 2], [1, 2, 1, 2]], [1]),
    ("node=2,gpu=4", [[1, 4], [2, 1]], [0, 1]),
]


def _hier(i):
    sysd, rows_, red = CASES[i]
    return synthesis_hierarchy(ParallelismMatrix.of(System.parse(sysd), rows_), red)


HIERS = [_hier(i) for i in range(len(CASES))]
INS = [instructions(h) for h in HIERS]


@st.composite
def programs(draw):
    i = draw(st.integers(0, len(HIERS) - 1))
    h = HIERS[i]
    seq = draw(st.lists(st.sampled_from(INS[i]), min_size=1, max_size=6))
    return h, lower(h, seq)


@settings(max_examples=300, deadline=None)
@given(programs())
def test_layouts_are_the_rows_of_figure_8_while_the_program_is_valid(hp):
    h, lp = hp
    k = len(h.matrix.reduction_groups(h.reduce)[0])
    ctx = initial_context(lp.num_devices, k)
    try:
        layouts = chunk_layouts(lp, k)
    except NotExecutable as err:
        layouts = None
        failed_at = err.step
    for i, step in enumerate(lp.steps, 1):
        try:
            ctx = apply_step(ctx, step.collective, step.groups)
        except RuleViolation:
            return  # past here the semantics has no states to compare with
        # a step the semantics accepts is always executable on MPI
        assert layouts is not None or failed_at > i
        if layouts is not None:
            assert [tuple(sorted(rows(s))) for s in ctx] == list(layouts[i])


@settings(max_examples=300, deadline=None)
@given(programs())
def test_layouts_match_the_numpy_referee_also_for_invalid_programs(hp):
    import numpy as np

    h, lp = hp
    k = len(h.matrix.reduction_groups(h.reduce)[0])
    data = np.zeros((lp.num_devices, k, 1), dtype=np.int64)
    try:
        ref = execute(lp, data)
    except RefereeNotExecutable as err:
        with pytest.raises(NotExecutable) as info:
            chunk_layouts(lp, k)
        assert info.value.step == err.step
        return
    assert [labels for labels, _ in ref] == list(chunk_layouts(lp, k)[-1])


def test_bytes_model_counts_held_chunks_and_broadcast_roots():
    g = ((0, 1, 2, 3),)
    lp = LoweredProgram((LoweredStep("Reduce", g), LoweredStep("Broadcast", g)), 4)
    assert model_handed_bytes(lp, 4, 10) == [[40, 40, 40, 40], [40, 0, 0, 0]]
    lp = LoweredProgram((LoweredStep("ReduceScatter", g), LoweredStep("AllGather", g)), 4)
    assert model_handed_bytes(lp, 4, 10) == [[40] * 4, [10] * 4]
    bad = LoweredProgram((LoweredStep("AllReduce", g), LoweredStep("AllReduce", g)), 4)
    assert model_handed_bytes(bad, 4, 10) is None  # reduced twice: Figure 8 has no state after step 2


def test_not_executable_steps_are_found_before_running():
    g = ((0, 1), (2, 3))
    lp = LoweredProgram((LoweredStep("Reduce", g), LoweredStep("AllReduce", ((0, 1, 2, 3),))), 4)
    with pytest.raises(NotExecutable, match="different chunk counts"):
        chunk_layouts(lp, 2)
    lp = LoweredProgram((LoweredStep("ReduceScatter", ((0, 1, 2),)),), 4)
    with pytest.raises(NotExecutable, match="cannot be scattered evenly"):
        chunk_layouts(lp, 2)
    with pytest.raises(ModelError, match="dtype 'complex128' is not an element type"):  # the one dtype check
        as_dtype("complex128", allowed=RUNNABLE)


def test_allgather_resorts_by_label():
    h = HIERS[3]  # two collapsed levels of sizes 2 and 4 over 8 devices: k = 8
    rs0 = lower_instruction(h, next(i for i in INS[3] if i.collective == "ReduceScatter" and i.slice == "root"
                                    and i.form.kind == "InsideGroup"))
    layout = chunk_layouts(LoweredProgram((rs0,), 8), 8)[1]
    assert [len(c) for c in layout] == [1] * 8
    assert gather_order(layout, (0, 1)) is None
    assert list(gather_order(((3,), (1,)), (0, 1))) == [1, 0]
    assert chunk_elements(1 << 20, 3, "int64") == (1 << 20) // 24
