"""The text format of reduction programs (docs/check.md): round trips, errors with line and column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.core.errors import ParseError
from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.reduction.dsl import Form, Instruction, Program
from meshplan.models.reduction.hierarchy import synthesis_hierarchy
from meshplan.models.reduction.lowering import lower
from meshplan.models.reduction.program_text import (GroupsStep, TextProgram, format_program, from_lowered,
                                                    parse_program, resolve)
from meshplan.models.reduction.semantics import COLLECTIVES
from meshplan.models.core.system import System

FIG2 = System.parse("rack=1,server=2,cpu=2,gpu=4")
FIG2D = ParallelismMatrix.of(FIG2, [[1, 1, 2, 2], [1, 2, 1, 2]], (4, 4))
H = synthesis_hierarchy(FIG2D, [1])

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
forms = st.one_of(st.just(Form("InsideGroup")),
                  st.builds(Form, st.sampled_from(["Parallel", "Master"]), names))
instructions = st.builds(Instruction, st.sampled_from(COLLECTIVES), names, forms)


@st.composite
def groups_steps(draw):
    devices = draw(st.permutations(range(draw(st.integers(1, 12)))))
    cuts = sorted(draw(st.sets(st.integers(1, len(devices) - 1), max_size=4))) if len(devices) > 1 else []
    bounds = [0, *cuts, len(devices)]
    groups = tuple(tuple(devices[a:b]) for a, b in zip(bounds, bounds[1:]))
    return GroupsStep(draw(st.sampled_from(COLLECTIVES)), groups)


programs = st.lists(st.one_of(instructions, groups_steps()), min_size=1, max_size=6).map(
    lambda items: TextProgram(tuple(items)))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs)
def test_round_trip(p):
    text = format_program(p)
    assert parse_program(text) == p
    assert format_program(parse_program(text)) == text


@settings(max_examples=200, deadline=None)
@given(programs, st.lists(st.sampled_from(["", "# comment", "   ", "\t# x = [[0]]"]), max_size=3))
def test_comments_blank_lines_and_spacing_do_not_matter(p, junk):
    lines = []
    for item in p.items:
        lines.extend(junk)
        text = str(item).replace("=", " = ").replace(",", " , ").replace("(", " ( ")
        lines.append("  " + text + "   # trailing comment")
    parsed = parse_program("\n".join(lines))
    assert parsed == p
    assert len(set(parsed.lines)) == len(parsed)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="AllReduceGatherBroadcastScatter slicegroupsform=[](),0123456789#\n\t-xroot", max_size=80))
def test_garbage_gives_parse_errors_with_a_position(text):
    try:
        parse_program(text, source="p.txt")
    except ParseError as err:
        assert err.source == "p.txt"
        if err.line is not None:
            assert 1 <= err.line <= max(1, text.count("\n") + 1)
            assert err.column is None or err.column >= 1
        assert "\n" not in str(err)


@pytest.mark.parametrize("text,line,column,words", [
    ("AllReduc slice=gpu", 1, 1, "unknown collective 'AllReduc'"),
    ("# x\n\nAllReduce slice=gpu form=Foo", 3, 26, "unknown form 'Foo'"),
    ("AllReduce groups=[[0,1],[1,2]]", 1, 26, "device 1 appears in two groups"),
    ("AllReduce groups=[[0,0]]", 1, 22, "device 0 appears twice in one group"),
    ("AllReduce groups=[[0,1],[2,3]", 1, 30, "expected ',' or ']'"),
    ("AllReduce groups=[[]]", 1, 19, "a device group is empty"),
    ("AllReduce groups=[[0,x]]", 1, 22, "expected a device id"),
    ("AllReduce groups=[[0,-1]]", 1, 22, "non-negative"),
    ("AllReduce slice=gpu groups=[[0]]", 1, 11, "either groups= or slice=/form="),
    ("AllReduce", 1, 10, "needs slice=<level>"),
    ("AllReduce form=Parallel(root)", 1, 11, "form= needs slice="),
    ("AllReduce slice=gpu form=Parallel(", 1, 35, "expected a synthesis level name"),
    ("AllReduce slice=gpu form=InsideGroup(root)", 1, 37, "InsideGroup takes no level"),
    ("AllReduce slice=gpu slice=cpu", 1, 21, "given twice"),
    ("AllReduce slice=gpu color=red", 1, 21, "unknown field 'color'"),
])
def test_errors_name_line_and_column(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_program(text, source="prog.txt")
    assert (err.value.line, err.value.column) == (line, column)
    assert words in str(err.value)
    assert str(err.value).startswith(f"prog.txt:{line}:{column}: ")


def test_empty_program_is_an_error():
    with pytest.raises(ParseError, match="no instructions"):
        parse_program("# nothing\n\n")


def test_collective_names_are_case_insensitive():
    p = parse_program("allreduce slice=root\nREDUCESCATTER groups=[[0,1]]")
    assert [str(i) for i in p.items] == ["AllReduce slice=root form=InsideGroup", "ReduceScatter groups=[[0,1]]"]


def test_resolve_lowers_like_the_dsl():
    text = "Reduce slice=server\nAllReduce slice=server form=Master(root)\nBroadcast slice=server form=InsideGroup\n"
    p = parse_program(text)
    prog = p.dsl_program()
    assert isinstance(prog, Program) and len(prog) == 3
    lowered = resolve(p, H)
    assert lowered.key == lower(H, prog).key
    assert lowered.steps[1].groups == ((0, 8), (2, 10), (4, 12), (6, 14))  # {A0,C0}, ... (Table 2, Master)
    assert lowered.steps[0].groups[:2] == ((0, 1), (8, 9))


def test_resolve_explicit_groups_and_round_trip_of_lowered_programs():
    p = parse_program("AllReduce groups=[[0,1,8,9],[2,3,10,11],[4,5,12,13],[6,7,14,15]]")
    lowered = resolve(p, H)
    assert lowered.steps[0].groups == ((0, 1, 8, 9), (2, 3, 10, 11), (4, 5, 12, 13), (6, 7, 14, 15))
    assert p.dsl_program() is None
    again = resolve(parse_program(format_program(from_lowered(lowered))), H)
    assert again.key == lowered.key


@pytest.mark.parametrize("text,line,words", [
    ("AllReduce slice=root\nAllReduce slice=nvlink", 2, "unknown synthesis level 'nvlink'"),
    ("AllReduce slice=gpu form=Parallel(gpu)", 1, "must be an ancestor"),
    ("# c\nAllReduce groups=[[0,16]]", 2, "device 16 out of range"),
])
def test_resolve_errors_name_the_line(text, line, words):
    with pytest.raises(ParseError) as err:
        resolve(parse_program(text, source="f.txt"), H)
    assert err.value.line == line and words in str(err.value)
    assert str(err.value).startswith(f"f.txt:{line}:")
