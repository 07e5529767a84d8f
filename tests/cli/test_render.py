"""Human tables never cut the answer: at 80 columns every matrix and program is printed whole
(meshplan/cli/render.py), and the axes carry their names (``--axis-names``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.markup import escape

from meshplan.cli.render import Column, matrix_lines, print_table, program_lines
from meshplan.models.core.collectives import Collective

README = ["solve", "placement", "--system", "a100-4x16", "--axes", "4,16", "--reduce", "0"]


def _short(step: dict) -> str:
    """A step of a schedule program in the table's short form, derived here from the JSON fields."""
    form = "" if step["form"] == "InsideGroup" else "," + step["form"]
    return f"{Collective.parse(step['collective']).short}({step['slice']}{form})"


@pytest.fixture(scope="module")
def readme_json():
    from meshplan.cli import main
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(README + ["--json"]) == 0
    return json.loads(buf.getvalue())


def test_readme_command_at_80_columns_shows_every_matrix_and_program_whole(cli, monkeypatch, readme_json):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(*README)
    assert code == 0
    lines = out.splitlines()
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    assert "…" not in out
    assert any(ln.startswith("#") and "matrix" in ln and "best program" in ln for ln in lines)  # a table
    names = readme_json["axis_names"]
    assert names == ["a0", "a1"]
    body = [ln.strip() for ln in lines]
    for pl in readme_json["placements"]:
        for name, row in zip(names, pl["matrix"]):  # each axis of the matrix on a line, whole
            cell = f"{name} [{','.join(map(str, row))}]"
            assert any(cell in ln for ln in lines), cell
        for step in pl["programs"][0]["steps"]:  # the best program, each collective whole
            assert any(_short(step) in ln for ln in body), _short(step)
    # each column is explained once, under the table
    for header in ("matrix", "AllReduce", "best program", "time", "speed-up", "progs"):
        assert sum(ln.startswith(f"{header}: ") for ln in lines) == 1, header


def test_axis_names_reach_table_json_schedule_and_mesh_export(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    plan = tmp_path / "plan.json"
    args = ["solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1", "--max-size", "2",
            "--axis-names", "data,model"]
    code, out, err = cli(*args, "--export", plan)
    assert code == 0, err
    assert "axes data=2, model=4" in out and "reduce model" in out
    assert any(ln.lstrip("0123456789 ").startswith("data  [") for ln in out.splitlines())
    doc = json.loads(plan.read_text())
    assert doc["axis_names"] == ["data", "model"]
    code, out, _ = cli(*args, "--json")
    assert json.loads(out)["axis_names"] == ["data", "model"]
    code, out, _ = cli("export", plan, "--format", "jax-mesh")
    assert code == 0 and "axis_names=('data', 'model')" in out
    code, out, _ = cli("export", plan, "--format", "torch-mesh", "--axis-names", "dp,tp")
    assert code == 0 and "mesh_dim_names=('dp', 'tp')" in out
    code, out, _ = cli("export", plan, "--format", "mpi4py")
    assert code == 0 and "axes data=2, model=4" in out
    # a schedule written before the field existed reads with the default names
    del doc["axis_names"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    code, out, _ = cli("export", old, "--format", "jax-mesh", "--json")
    assert code == 0 and json.loads(out)["axis_names"] == ["a0", "a1"]
    code, _, err = cli("check", old)
    assert code == 0, err


@pytest.mark.parametrize("names,msg", [
    ("data", "needs 2 names"),
    ("data,model,pipe", "needs 2 names"),
    ("data,data", "'data' names more than one axis"),
    ("data,2model", "'2model' is not a name"),
    ("data,", "'' is not a name"),
])
def test_bad_axis_names_are_one_line_errors(cli, names, msg):
    code, out, err = cli("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                         "--axis-names", names)
    assert code == 2 and err.startswith("error: --axis-names") and msg in err and err.count("\n") == 1, err


def test_a_tampered_axis_names_field_is_rejected(cli, tmp_path):
    plan = tmp_path / "plan.json"
    assert cli("solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "0", "--max-size",
               "2", "--export", plan)[0] == 0
    doc = json.loads(plan.read_text())
    doc["axis_names"] = ["x"]
    plan.write_text(json.dumps(doc))
    code, _, err = cli("check", plan)
    assert code == 2 and "axis_names" in err


def _render(width: int, columns, rows) -> str:
    con = Console(width=width, record=True, highlight=False)
    with con.capture() as cap:
        print_table(con, columns, rows)
    return cap.get()


def test_a_table_too_wide_for_the_terminal_stacks_its_rows():
    columns = [Column("#"), Column("matrix", "left"), Column("program", "left", whole=False, explain="the program")]
    wide = "[" + ",".join(["[1,2,2,2,2,2,2,2,2]"] * 3) + "]"  # 61 columns: no room for the program beside it
    prog = program_lines("ReduceScatter slice=node form=InsideGroup; AllReduce slice=node form=Parallel(root); "
                         "AllGather slice=node form=InsideGroup")
    out = _render(80, columns, [("0", wide, prog)])
    assert wide in out and "AR(node,Parallel(root)) ;" in out and "#" in out.splitlines()[0]
    assert all(len(ln) <= 80 for ln in out.splitlines())
    assert [ln for ln in out.splitlines() if ln.startswith("program: ")] == ["program: the program"]


def test_matrix_and_program_lines():
    assert matrix_lines([[1, 4], [4, 4]], ("data", "model")) == "data  [1,4]\nmodel [4,4]"
    assert matrix_lines([[2]]) == "a0 [2]"
    assert program_lines("RS(node) ; AG(node)") == "RS(node) ;\nAG(node)"
    assert program_lines("Reduce slice=gpu form=Master(node)") == "R(gpu,Master(node))"


words = st.text(alphabet="abcdefghij(),[]0123456789", min_size=1, max_size=18)
cells = st.lists(words, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(width=st.integers(40, 160), ncols=st.integers(1, 7), data=st.data())
def test_any_table_fits_and_keeps_every_word_whole(width, ncols, data):
    columns = [Column(f"c{j}", whole=data.draw(st.booleans())) for j in range(ncols)]
    rows = data.draw(st.lists(st.tuples(*[cells] * ncols), min_size=1, max_size=4))
    out = _render(width, columns, [tuple(escape(c) for c in r) for r in rows])  # cells are rich markup
    lines = out.splitlines()
    assert all(len(ln) <= width for ln in lines)
    for r in rows:
        for cell, col in zip(r, columns):
            for w in cell.split():
                assert any(w in ln for ln in lines), (w, out)
            if col.whole and len(cell) <= width - 20:  # a whole cell is never broken while it can fit
                assert any(cell in ln for ln in lines), (cell, out)


def test_progress_bar_shows_counts_on_a_terminal_only(monkeypatch, capsys):
    import sys

    from meshplan.cli.common import progress

    with progress(True, "running", "program") as update:  # stderr is not a terminal here
        assert update is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with progress(False, "running", "program") as update:  # --json
        assert update is None
    with progress(True, "running on MPI", "program") as update:
        update(2, 3, "0.1")
    out, err = capsys.readouterr()
    assert out == "" and "running on MPI" in err and "program" in err and "2/3" in err and "0.1" in err


def test_bound_reports_progress_per_program(tmp_path):
    from meshplan.api.soap import analyze_bounds

    src = tmp_path / "two.py"
    src.write_text("def a(N):\n    for i in range(N):\n        x[i] = y[i]\n\n\n"
                   "def b(N):\n    for i in range(N):\n        for j in range(N):\n            C[i] += A[i, j]\n")
    calls = []
    reports = analyze_bounds(src, tiles=False, progress=lambda done, total, what="": calls.append((done, total, what)))
    assert [r.program for r in reports] == ["a", "b"]
    assert (0, 2, "a: bound") in calls and (1, 2, "b: bound") in calls
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and all(t == 2 for _, t, _ in calls)


def test_json_is_one_line_unless_indented(cli):
    argv = ["tensor", "halo", "--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "3"]
    code, out, _ = cli(*argv, "--json")
    assert code == 0 and out.count("\n") == 1 and json.loads(out)["total_bytes"] > 0
    code, indented, _ = cli(*argv, "--json-indent", "2")  # implies --json
    assert code == 0 and json.loads(indented) == json.loads(out) and indented.count("\n") > 20
    assert "\n  \"partition\"" in indented
    with pytest.raises(SystemExit) as ex:  # argparse: one error line, exit 2
        cli(*argv, "--json-indent", "-1")
    assert ex.value.code == 2


def test_user_text_keeps_its_brackets_and_piped_lines_no_trailing_spaces():
    import io

    from meshplan.cli.render import make_console, safe_markup

    assert safe_markup("rowstr[j] [bold]x[/bold] [red]m.py") == "rowstr\\[j] [bold]x[/bold] \\[red]m.py"
    buf = io.StringIO()
    con = make_console(width=80, file=buf)
    print_table(con, [Column("file", "left"), Column("note", "left", whole=False)],
                [("probe/[red]m.py", "for k in range(rowstr[j], rowstr[j+1])")])
    out = buf.getvalue()
    assert "probe/[red]m.py" in out and "rowstr[j+1]" in out
    assert all(ln == ln.rstrip(" ") for ln in out.splitlines())


def test_a_rich_table_of_a_verb_prints_in_the_one_style_without_cutting():
    import io

    from rich.table import Table

    from meshplan.cli.render import make_console

    t = Table(title="t")
    for h in ("schedule", "measured (Python)", "model"):
        t.add_column(h, justify="right")
    t.add_row("meshplan (COSMA)", "1,234,567,890", "2,345,678,901")
    buf = io.StringIO()
    make_console(width=40, file=buf).print(t)
    out = buf.getvalue()
    assert "1,234,567,890" in out and "2,345,678,901" in out and "…" not in out
    assert max(len(ln) for ln in out.splitlines()) <= 40


def test_help_prose_is_wrapped_and_examples_kept(capsys, monkeypatch):
    from meshplan.cli import build_parser

    monkeypatch.setenv("COLUMNS", "80")
    for verb in ("solve", "factor", "tensor", "bound"):
        text = build_parser([verb])._subparsers._group_actions[0].choices[verb].format_help()
        prose = text.split("examples:")[0]
        assert max(len(ln) for ln in prose.splitlines()) <= 80, verb
