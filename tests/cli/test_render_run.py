"""``meshplan run``: nccl-tests bandwidths (algbw, busbw), progress counts reported by rank 0, and a table
that prints every program whole at 80 columns — all from one MPI launch."""

from __future__ import annotations

import pytest

from meshplan.api.reduction_run import run_programs
from meshplan.models.core.collectives import Collective

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def runs(export_schedule):
    calls = []
    path = export_schedule("render_run", "node=2,gpu=4", "2,4", "1")
    res = run_programs(path, placement="0,1", program="0,1,2", bytes="64KiB", repeats=2,
                       progress=lambda done, total, what: calls.append((done, total, what)))
    return res, calls


def test_progress_counts_come_from_rank_zero(runs):
    res, calls = runs
    n = len(res.programs)
    assert n >= 4
    assert calls and calls[-1] == (n, n, "")
    assert all(0 <= done <= total == n for done, total, _ in calls)


def test_algbw_and_busbw_follow_the_nccl_tests_definitions(runs):
    res, _ = runs
    sched = res.schedule_value
    for x in res.programs:
        assert x["verified"]
        k = len(sched.placements[x["placement"]].reduction_groups[0])
        assert x["algbw_GBps"] == pytest.approx(res.buffer_bytes / x["time_s"] / 1e9)
        assert x["busbw_GBps"] == pytest.approx(x["algbw_GBps"] * 2 * (k - 1) / k)
        for st in x["steps"]:
            c, n = Collective.parse(st["collective"]), len(st["groups"][0])
            size = max(st["bytes_per_rank"]) * (n if c is Collective.ALL_GATHER else 1)
            factor = {Collective.ALL_REDUCE: 2 * (n - 1) / n, Collective.REDUCE_SCATTER: (n - 1) / n,
                      Collective.ALL_GATHER: (n - 1) / n}.get(c, 1.0)
            assert st["algbw_GBps"] == pytest.approx(size / st["time_s"] / 1e9)
            assert st["busbw_GBps"] == pytest.approx(st["algbw_GBps"] * factor)


@pytest.mark.parametrize("columns", ["80", "160"])
def test_run_table_prints_every_program_whole(runs, capsys, monkeypatch, columns):
    from meshplan.cli.run import _table

    res, _ = runs
    monkeypatch.setenv("COLUMNS", columns)
    _table(res)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(ln) <= int(columns) for ln in lines)
    assert "…" not in out
    for x in res.programs:
        for ins in x["text"].split(";"):
            w = ins.split()
            form = w[2][5:]
            short = f"{Collective.parse(w[0]).short}({w[1][6:]}{'' if form == 'InsideGroup' else ',' + form})"
            assert any(short in ln for ln in lines), short
    for header in ("algbw", "busbw"):
        assert sum(ln.startswith(f"{header}: ") for ln in lines) == 1
    assert f"{len(res.programs)} of {len(res.programs)} programs verified" in out
