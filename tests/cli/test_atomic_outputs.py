"""Atomic outputs of the CLI (docs/formats.md, "Output files"): a full disk leaves the previous file intact,
bad output paths are refused before the work starts, and the name reported is the file written.

The full disk is real: a 64 KiB tmpfs mounted for the test (skipped with the reason where mounting is not
permitted, e.g. without root).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid

import pytest


@pytest.fixture(scope="module")
def schedule(export_schedule):
    return export_schedule("atomic", "node=2,gpu=2", "2,2", "1")


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs holding ``prev.json`` (a valid schedule-sized JSON file) and filled to the last byte."""
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to make a full disk: {proc.stderr.strip() or proc.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(directory) -> None:
    """Write a filler file until the file system says ENOSPC."""
    with open(directory / "filler", "wb", buffering=0) as fh:  # unbuffered: nothing left to flush at close
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError as err:
            assert err.errno == errno.ENOSPC


def _files(directory):
    return sorted(p.name for p in directory.iterdir())


def test_full_disk_solve_export_leaves_the_previous_schedule_intact(cli, full_disk, schedule):
    prev = full_disk / "prev.json"
    prev.write_text(json.dumps({"previous": True, "pad": "x" * 2000}) + "\n")
    before = prev.read_bytes()
    _fill(full_disk)
    code, _, err = cli("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                       "--max-size", "3", "--export", str(prev), "--json")
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: cannot write schedule file") and "No space left on device" in line
    assert "the previous file is unchanged" in line
    assert prev.read_bytes() == before and json.loads(before)["previous"] is True
    assert _files(full_disk) == ["filler", "prev.json"]  # no temporary file left


@pytest.mark.parametrize("fmt", ["mpi4py", "jax-mesh"])
def test_full_disk_export_keeps_the_previous_output(cli, full_disk, schedule, fmt):
    out = full_disk / "out.py"
    out.write_text("print('previous')\n")
    _fill(full_disk)
    code, _, err = cli("export", str(schedule), "--format", fmt, "-o", str(out))
    assert code == 2 and "No space left on device" in err
    assert out.read_text() == "print('previous')\n"
    assert _files(full_disk) == ["filler", "out.py"]


def test_full_disk_show_png(cli, full_disk, schedule):
    png = full_disk / "p.png"
    png.write_bytes(b"old picture")
    _fill(full_disk)
    code, _, err = cli("show", str(schedule), "--png", str(png))
    assert code == 2 and "No space left on device" in err
    assert png.read_bytes() == b"old picture" and _files(full_disk) == ["filler", "p.png"]


def test_export_after_space_is_freed_replaces_the_file(cli, full_disk, schedule):
    out = full_disk / "mesh.json"
    out.write_text("old\n")
    _fill(full_disk)
    assert cli("export", str(schedule), "--format", "jax-mesh", "--json", "-o", str(out))[0] == 2
    (full_disk / "filler").unlink()
    code, _, err = cli("export", str(schedule), "--format", "jax-mesh", "--json", "-o", str(out))
    assert code == 0, err
    assert json.loads(out.read_text())["axes"] and _files(full_disk) == ["mesh.json"]


# -- paths checked before the work --------------------------------------------------------------------------

BAD = {"missing-dir": "{tmp}/no/such/dir/out.json", "directory": "{tmp}", "device": "/dev/full",
       "under-a-file": "{tmp}/plain/out.json"}


def _bad(tmp_path, kind):
    (tmp_path / "plain").write_text("")
    return BAD[kind].format(tmp=tmp_path)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_solve_export_path_checked_before_synthesis(cli, tmp_path, kind, monkeypatch):
    import meshplan.api.placement as api

    def no_work(*a, **k):
        raise AssertionError("the synthesis started before the output path was checked")

    monkeypatch.setattr(api, "solve_placement", no_work)
    code, out, err = cli("solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "1",
                         "--export", _bad(tmp_path, kind))
    assert code == 2 and out == ""
    assert err.startswith("error: cannot write --export file") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", sorted(BAD))
def test_calibrate_output_checked_before_mpi(cli, tmp_path, kind, monkeypatch):
    import meshplan.api.calibration as api

    def no_work(*a, **k):
        raise AssertionError("the measurements started before the output path was checked")

    monkeypatch.setattr(api, "calibrate", no_work)
    code, _, err = cli("calibrate", "--np", "4", "-o", _bad(tmp_path, kind))
    assert code == 2 and err.startswith("error: cannot write -o file"), err


@pytest.mark.parametrize("kind", sorted(BAD))
def test_export_and_show_paths_checked(cli, tmp_path, kind, schedule):
    code, _, err = cli("export", str(schedule), "--format", "mpi4py", "-o", _bad(tmp_path, kind))
    assert code == 2 and err.startswith("error: cannot write -o file"), err
    code, _, err = cli("show", str(schedule), "--png", _bad(tmp_path, kind).replace(".json", ".png"))
    assert code == 2 and err.startswith("error: cannot write picture"), err


def _stat_or_none(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def test_png_dev_full_is_an_error_not_dev_full_png(cli, schedule):
    # compare before/after: an older meshplan (or another tool) may have left /dev/full.png behind
    before = _stat_or_none("/dev/full.png")
    code, _, err = cli("show", str(schedule), "--png", "/dev/full")
    assert code == 2 and "character device, not a regular file" in err
    assert _stat_or_none("/dev/full.png") == before


def test_png_with_another_suffix_is_refused(cli, schedule, tmp_path):
    code, _, err = cli("show", str(schedule), "--png", str(tmp_path / "x.wibble"))
    assert code == 2 and "name the file *.png" in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["picture", "picture.png", "PICTURE.PNG"])
def test_show_reports_the_name_it_wrote(cli, schedule, tmp_path, name):
    target = tmp_path / name
    code, out, _ = cli("show", str(schedule), "--png", str(target), "--json")
    assert code == 0 and json.loads(out)["png"] == str(target)
    assert _files(tmp_path) == [name] and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = cli("show", str(schedule), "--png", str(target))
    assert code == 0 and out.startswith(f"wrote {target} ")
