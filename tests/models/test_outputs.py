"""Output files are written whole or not at all (meshplan.models.core.outputs; docs/formats.md, "Output files").

A writer that fails midway — an exception, Ctrl-C, a full disk (tests/cli/test_atomic_outputs.py makes a real
one) — leaves the previous file byte for byte and no temporary file; bad paths are refused before anything is
written.
"""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.core.errors import ModelError
from meshplan.models.core.outputs import OutputError, atomic_path, check_output_path, write_output

PREVIOUS = '{"valid": true}\n'


def _listing(d):
    return sorted(p.name for p in d.iterdir())


def test_writes_text_bytes_and_streams(tmp_path):
    assert write_output(tmp_path / "a.txt", "héllo\n") == tmp_path / "a.txt"
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    write_output(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    write_output(tmp_path / "c.bin", lambda fh: [fh.write(b"x" * 1000) for _ in range(5)])
    assert (tmp_path / "c.bin").read_bytes() == b"x" * 5000
    assert _listing(tmp_path) == ["a.txt", "b.bin", "c.bin"]  # no temporary or probe file left


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("exc", [Boom("disk gremlin"), KeyboardInterrupt(), OSError(28, "No space left on device")])
def test_a_writer_failing_midway_leaves_the_previous_file_intact(tmp_path, exc):
    target = tmp_path / "plan.json"
    target.write_text(PREVIOUS)

    def writer(fh):
        fh.write(b'{"half": ')
        fh.flush()
        raise exc

    expected = OutputError if isinstance(exc, OSError) else type(exc)
    with pytest.raises(expected) as info:
        write_output(target, writer, what="--export file")
    assert target.read_text() == PREVIOUS
    assert _listing(tmp_path) == ["plan.json"]
    if isinstance(exc, OSError):
        msg = str(info.value)
        assert "No space left on device" in msg and "the previous file is unchanged" in msg
        assert isinstance(info.value, ModelError)  # the CLI's one error line, exit 2


def test_a_failing_new_file_leaves_nothing(tmp_path):
    with pytest.raises(OutputError, match="no file was written"):
        write_output(tmp_path / "new.json", lambda fh: (_ for _ in ()).throw(OSError(5, "Input/output error")))
    assert _listing(tmp_path) == []


def test_atomic_path_for_foreign_writers(tmp_path):
    target = tmp_path / "lib.so"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and not tmp.exists()
        tmp.write_bytes(b"ELF")
        assert not target.exists()  # nothing visible until the block ends
    assert target.read_bytes() == b"ELF" and _listing(tmp_path) == ["lib.so"]
    with pytest.raises(OutputError, match="nothing was written"):
        with atomic_path(tmp_path / "other.so"):
            pass
    assert _listing(tmp_path) == ["lib.so"]


def test_permissions_kept_on_replace_and_umask_on_create(tmp_path):
    old = os.umask(0o022)
    try:
        write_output(tmp_path / "new", "x")
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o644
        exe = tmp_path / "run.sh"
        exe.write_text("old")
        exe.chmod(0o750)
        write_output(exe, "new")
        assert stat.S_IMODE(exe.stat().st_mode) == 0o750 and exe.read_text() == "new"
    finally:
        os.umask(old)


def test_a_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.json"
    real.write_text(PREVIOUS)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_output(link, "{}\n")
    assert link.is_symlink() and real.read_text() == "{}\n"


@pytest.mark.parametrize("make,msg", [
    (lambda d: d / "missing" / "x.json", "directory .* does not exist"),
    (lambda d: d, "is a directory"),
    (lambda d: "", "empty"),
    (lambda d: "/dev/full", "character device, not a regular file"),
    (lambda d: "/dev/null", "character device, not a regular file"),
    (lambda d: d / "file.txt" / "x.json", "(?i)not a directory"),
])
def test_bad_paths_are_refused_before_writing(tmp_path, make, msg):
    (tmp_path / "file.txt").write_text("")
    before = _listing(tmp_path)
    with pytest.raises(OutputError, match=msg):
        check_output_path(make(tmp_path), what="-o file")
    with pytest.raises(OutputError, match=msg):
        write_output(make(tmp_path), "data")
    assert _listing(tmp_path) == before
    assert not os.path.exists("/dev/full.png") and not os.path.exists("/dev/full.tmp")


def test_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="named pipe"):
        write_output(fifo, "x")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=6), st.integers(min_value=0, max_value=6))
def test_property_whole_or_previous(tmp_path_factory, chunks, fail_at):
    """Whatever the writer writes, the target afterwards holds either all of it or the previous content."""
    d = tmp_path_factory.mktemp("prop")
    target = d / "out"
    target.write_bytes(b"previous")

    def writer(fh):
        for i, c in enumerate(chunks):
            if i == fail_at:
                raise Boom("midway")
            fh.write(c)

    failed = fail_at < len(chunks)
    if failed:
        with pytest.raises(Boom):
            write_output(target, writer)
    else:
        write_output(target, writer)
    assert target.read_bytes() == (b"previous" if failed else b"".join(chunks))
    assert _listing(d) == ["out"]


# -- one way to write a file -----------------------------------------------------------------------------

_ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
#: calls that write files; each must go through meshplan.models.core.outputs
_WRITERS = ("write_text(", "write_bytes(", ".savefig(", "np.save(", "np.savez(", "json.dump(", "os.replace(",
            "os.rename(", "shutil.move(")
#: (file, line fragment) pairs allowed to contain one: the helper itself, a stream that is not a file
_ALLOWED = {("models/core/outputs.py", ""), ("exec/redistribution/xla.py", "json.dump(out, sys.stdout)"),
            ("meshplan/plots.py", "write_output(path, lambda fh: fig.savefig(fh"),
            # a child process's answer on its stdout, as xla.py's
            ("meshplan/jax/compare.py", ", sys.stdout)"),
            # the text of the standalone torch program export writes (it cannot import meshplan)
            ("exec/reduction/export.py", 'with open(path, "w") as f:'), ("exec/reduction/export.py", "json.dump(got, f)")}


def _sources():
    for layer in ("meshplan", "models", "encodings", "solvers", "exec"):
        yield from sorted((_ROOT / layer).rglob("*.py"))


def test_every_file_writer_goes_through_the_atomic_helper():
    import re

    opens = re.compile(r"""\bopen\([^)]*,\s*(mode\s*=\s*)?["'][wax]b?\+?["']""")
    found = []
    for path in _sources():
        rel = str(path.relative_to(_ROOT))
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if not (opens.search(code) or any(w in code for w in _WRITERS)):
                continue
            if any(rel == f and frag in line for f, frag in _ALLOWED):
                continue
            found.append(f"{rel}:{no}: {line.strip()}")
    assert not found, "write files with meshplan.models.core.outputs (write_output/atomic_path):\n" + "\n".join(found)
