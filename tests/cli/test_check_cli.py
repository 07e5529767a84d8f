"""`meshplan check`: the example programs' verdicts, diagnoses, --json, schedules, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "examples" / "programs"
FIG2 = ["--system", "rack=1,server=2,cpu=2,gpu=4", "--axes", "4,4", "--reduce", "1",
        "--matrix", "[[1,1,2,2],[1,2,1,2]]"]
A100 = ["--system", "a100-2x16", "--axes", "32", "--reduce", "0"]


def _expected_verdicts() -> dict[str, str]:
    """The table of examples/programs/README.md: file -> valid/invalid."""
    table = {}
    for line in (PROGRAMS / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`([\w.]+\.txt)`\s*\|\s*(valid|invalid)\s*\|", line)
        if m:
            table[m.group(1)] = m.group(2)
    return table


def test_readme_lists_every_example():
    assert set(_expected_verdicts()) == {p.name for p in PROGRAMS.glob("*.txt")}


@pytest.mark.parametrize("name,verdict", sorted(_expected_verdicts().items()))
def test_examples_have_their_expected_verdicts(cli, name, verdict):
    flags = A100 if name == "blueconnect_a100.txt" else FIG2
    code, out, err = cli("check", PROGRAMS / name, *flags, "--json")
    doc = json.loads(out)
    assert err == ""
    assert doc["valid"] is (verdict == "valid")
    assert code == (0 if verdict == "valid" else 1)
    assert doc["agree"] is True
    assert doc["proof"]["status"] == ("proved" if doc["numeric"]["correct"] else "refuted")
    # the command line in the file's header runs as shown
    header = next(line for line in (PROGRAMS / name).read_text().splitlines() if line.startswith("#   meshplan check"))
    assert str(Path("examples/programs") / name) in header


def test_valid_program_prints_steps_and_simulated_time(cli):
    code, out, _ = cli("check", PROGRAMS / "fig3c_reduce_allreduce_broadcast.txt", *FIG2)
    assert code == 0
    assert "valid: 3 steps reach the requested reduction; simulated time" in out
    assert "synthesis hierarchy [server=2 gpu=2]" in out
    assert "z3 proof: proved" in out and "numpy run: correct" in out


def test_json_of_a_valid_program(cli):
    code, out, _ = cli("check", PROGRAMS / "blueconnect_rs_ar_ag.txt", *FIG2, "--json", "--bytes", "64MiB",
                       "--algo", "tree")
    doc = json.loads(out)
    assert code == 0 and doc["valid"] and doc["failure"] is None and doc["shortfalls"] == []
    assert doc["steps"] == 3 and doc["chunks"] == 4 and doc["time_s"] > 0
    assert doc["reduction_groups"][0] == [0, 1, 8, 9]
    assert doc["proof"] == {"status": "proved", "reason": doc["proof"]["reason"], "step": None, "counterexample": None}
    assert doc["bytes_per_device"] == 64 * 2**20 and doc["algo"] == "tree"


def test_double_count_is_diagnosed_at_step_2(cli):
    code, out, _ = cli("check", PROGRAMS / "double_count.txt", *FIG2)
    assert code == 1
    out = " ".join(out.split())  # the answer wraps at 80 columns when piped
    assert ("invalid: step 2, AllReduce over devices [0, 1]: chunk 0 on device 1 already contains device 0's "
            "contribution — it would be reduced twice") in out
    assert "rule R-ALLREDUCE, failed premise: each chunk's contributions are disjoint" in out
    assert "line 5: AllReduce slice=server form=InsideGroup" in out
    assert "states of the group before step 2" in out and "0,1" in out
    assert "z3 proof: refuted" in out and "counterexample input" in out and "wrong output: device 0 chunk 0" in out


@pytest.mark.parametrize("name,step,group,premise", [
    ("fig4a_reducescatter_allreduce.txt", 2, [0, 1], "all devices hold the same chunks"),
    ("fig4b_allreduce_allreduce.txt", 2, [0, 1, 8, 9], "each chunk's contributions are disjoint"),
    ("double_count.txt", 2, [0, 1], "each chunk's contributions are disjoint"),
    ("broadcast_no_increase.txt", 2, [0, 1], "the root holds more than some device"),
])
def test_rule_failures_in_json(cli, name, step, group, premise):
    code, out, _ = cli("check", PROGRAMS / name, *FIG2, "--json")
    f = json.loads(out)["failure"]
    assert code == 1
    assert (f["step"], f["group"], f["premise"]) == (step, group, premise)
    assert f["rule"] == ("R-BROADCAST" if name.startswith("broadcast") else "R-ALLREDUCE")
    assert f["collective"] in ("AllReduce", "Broadcast")
    assert set(f["states_before"]) == {str(d) for d in group}


def test_fig4b_states_show_the_double_count(cli):
    _, out, _ = cli("check", PROGRAMS / "fig4b_allreduce_allreduce.txt", *FIG2, "--json")
    doc = json.loads(out)
    assert doc["failure"]["states_before"]["8"] == [[0, 8]] * 4  # C0 already holds A0's data
    assert "chunk 0 on device 8 already contains device 0's contribution" in doc["failure"]["detail"]
    ce = doc["proof"]["counterexample"]
    assert len(ce["inputs"]) == 16 and all(len(row) == 4 for row in ce["inputs"])
    w = ce["wrong"][0]
    assert (w["device"], w["chunk"]) == (0, 0) and w["got"] != w["expected"]
    assert [t[2] for t in w["sum"]] == [2, 2, 2, 2]


def test_missing_contribution_reports_the_devices_and_chunks_that_fall_short(cli):
    code, out, _ = cli("check", PROGRAMS / "missing_contribution.txt", *FIG2, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["failure"] is None and doc["crossing"] is None
    assert {"device": 0, "chunk": 0, "missing": [8, 9], "extra": []} in doc["shortfalls"]
    assert len(doc["shortfalls"]) == 64
    code, text, _ = cli("check", PROGRAMS / "missing_contribution.txt", *FIG2)
    assert "every step satisfies its rule, but the program ends before" in text
    assert "device 0, chunk 0: misses the contributions of devices [8, 9]" in text


def test_wrong_axis_is_traced_to_its_step(cli):
    code, out, _ = cli("check", PROGRAMS / "wrong_axis.txt", *FIG2, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["failure"] is None
    assert {"device": 0, "chunk": 0, "missing": [8, 9], "extra": [2, 3]} in doc["shortfalls"]
    c = doc["crossing"]
    assert (c["step"], c["group"], c["device"], c["foreign"]) == (1, [0, 1, 2, 3], 0, 2)
    _, text, _ = cli("check", PROGRAMS / "wrong_axis.txt", *FIG2)
    assert "cause: step 1, AllReduce over devices [0, 1, 2, 3]" in text and "non-reduction axis" in text


def test_broadcast_premise_only_failure_carries_a_note(cli):
    code, out, _ = cli("check", PROGRAMS / "broadcast_no_increase.txt", *FIG2)
    assert code == 1 and "z3 proof: proved" in out and "note: the program computes the right sums" in out


def test_matrix_may_be_omitted_when_only_one_exists(cli):
    code, out, _ = cli("check", PROGRAMS / "blueconnect_a100.txt", *A100)
    assert code == 0 and "matrix [[2,16]]" in out and "32 chunks per device" in out


def test_matrix_candidates_are_listed(cli):
    code, out, err = cli("check", PROGRAMS / "fig3a_allreduce.txt", *FIG2[:6])
    assert code == 2 and out == ""
    assert err.startswith("error: 4 parallelism matrices place axes [4, 4]") and err.count("\n") == 1
    assert "'[[1,1,2,2],[1,2,1,2]]'" in err


def test_no_proof_flag(cli):
    code, out, _ = cli("check", PROGRAMS / "fig3a_allreduce.txt", *FIG2, "--json", "--no-proof")
    assert code == 0 and json.loads(out)["proof"] is None


@pytest.mark.parametrize("text,words", [
    ("AllReduce slice=nvlink\n", "prog.txt:1: `AllReduce slice=nvlink form=InsideGroup`: unknown synthesis level "
                                 "'nvlink'"),
    ("# c\nAllReduce groups=[[0,1],[1,2]]\n", "prog.txt:2:26: device 1 appears in two groups"),
    ("AllGather groups=[[0,1],[2,3]\n", "prog.txt:1:30: expected ',' or ']'"),
    ("AllReduce groups=[[0,1],[2,16]]\n", "prog.txt:1: `AllReduce groups=[[0,1],[2,16]]`: device 16 out of range"),
    ("AllReduce slice=gpu form=Parallel(gpu)\n", "must be an ancestor"),
    ("Allreduse slice=gpu\n", "prog.txt:1:1: unknown collective 'Allreduse'"),
    ("\n# only comments\n", "no instructions"),
])
def test_bad_programs_give_one_line_errors(cli, tmp_path, text, words):
    prog = tmp_path / "prog.txt"
    prog.write_text(text)
    code, out, err = cli("check", prog, *FIG2)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert words in err.replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("argv,words", [
    (["--matrix", "[[1,1,2,2],[1,2,1,2]"], "--matrix must be a list of rows"),
    (["--matrix", "[[2,2],[2,2]]"], "row 0 of the matrix has 2 entries"),
    (["--axes", "4,5"], "multiply to 20"),
    (["--reduce", "2"], "reduction axis 2 out of range"),
    (["--system", "nonsense"], "unknown system 'nonsense'"),
    (["--bytes", "lots"], "bad size 'lots'"),
])
def test_bad_flags_give_one_line_errors(cli, argv, words):
    flags = list(FIG2)
    for key, value in zip(argv[::2], argv[1::2]):
        if key in flags:
            flags[flags.index(key) + 1] = value
        else:
            flags += [key, value]
    code, out, err = cli("check", PROGRAMS / "fig3a_allreduce.txt", *flags)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1
    assert words in err


def test_missing_flags_and_files(cli):
    code, _, err = cli("check", PROGRAMS / "fig3a_allreduce.txt", "--axes", "4,4")
    assert code == 2 and "needs --system, --reduce" in err
    code, _, err = cli("check", "no/such/file.txt", *FIG2)
    assert code == 2 and "not found" in err


def test_schedules_from_solve_placement(cli, tmp_path):
    plan = tmp_path / "plan.json"
    code, _, _ = cli("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                     "--max-size", "3", "--export", plan)
    assert code == 0
    code, out, _ = cli("check", plan, "--json")
    doc = json.loads(out)
    n = sum(len(p["programs"]) for p in json.loads(plan.read_text())["placements"])
    assert code == 0 and doc["valid"] and len(doc["results"]) == n >= 6
    assert all(r["proof"]["status"] == "proved" and r["numeric"]["correct"] for r in doc["results"])
    code, out, _ = cli("check", plan, "--placement", "0", "--program", "0,1")
    assert code == 0 and "2 of 2 programs valid" in out
    # tamper: the first program reduces twice — with steps alone the text disagrees and the file is
    # rejected as edited (exit 2); edited consistently (text too) it is re-derived and found invalid (exit 1)
    data = json.loads(plan.read_text())
    prog = data["placements"][0]["programs"][0]
    prog["steps"].append(dict(prog["steps"][0]))
    plan.write_text(json.dumps(data))
    code, _, err = cli("check", plan, "--placement", "0", "--program", "0")
    assert code == 2 and "programs[0].text" in err
    prog["text"] = prog["text"] + "; " + prog["text"]
    plan.write_text(json.dumps(data))
    code, out, _ = cli("check", plan, "--placement", "0", "--program", "0")
    assert code == 1 and "0 of 1 programs valid" in out and "invalid: step" in out
    code, _, err = cli("check", plan, "--system", "node=2,gpu=4")
    assert code == 2 and "read from the schedule" in err
    code, _, err = cli("check", plan, "--placement", "9")
    assert code == 2 and "--placement 9 out of range" in err


_LINE = st.one_of(
    st.builds(lambda c, s, f: f"{c} slice={s} form={f}", st.sampled_from(["AllReduce", "ReduceScatter", "AllGather",
                                                                          "Reduce", "Broadcast"]),
              st.sampled_from(["root", "server", "gpu", "cpu", "bogus"]),
              st.sampled_from(["InsideGroup", "Parallel(root)", "Master(root)", "Parallel(server)", "Parallel(gpu)"])),
    st.builds(lambda c, g: f"{c} groups={g}", st.sampled_from(["AllReduce", "ReduceScatter", "AllGather", "Reduce",
                                                               "Broadcast"]),
              st.lists(st.lists(st.integers(0, 17), min_size=1, max_size=4), min_size=1, max_size=4).map(str)),
    st.text(alphabet="AllReduce slice=groups[],0123()", max_size=30),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_LINE, min_size=0, max_size=4))
def test_any_program_text_gives_a_verdict_or_a_one_line_error(cli, tmp_path_factory, lines):
    prog = tmp_path_factory.mktemp("fuzz") / "p.txt"
    prog.write_text("\n".join(lines) + "\n")
    code, out, err = cli("check", prog, *FIG2, "--json")
    assert code in (0, 1, 2), err
    if code == 2:
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1 and "internal error" not in err
    else:
        doc = json.loads(out)
        assert doc["valid"] is (code == 0) and doc["agree"], doc["note"]
