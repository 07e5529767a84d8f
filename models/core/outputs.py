"""Output files written whole or not at all (DESIGN.md, "Errors"; docs/formats.md, "Output files").

Every file meshplan writes — schedules (``solve --export``), system files
(``calibrate -o``), exported programs and meshes (``export -o``), pictures
(``show --png``), the MPI runtime's job files and its compiled helpers — goes
through this module:

* :func:`check_output_path` — called *before* the work starts, so a bad path
  costs nothing: the name is not empty, not a directory and not an existing
  non-regular file (a device such as ``/dev/full`` or ``/dev/null``, a pipe, a
  socket: renaming a file over it would replace the device node, writing into it
  is not a file the user can read back); its directory exists and a file can be
  created there (probed by creating and removing one, which also catches
  read-only file systems).
* :func:`atomic_path` — a context manager yielding a fresh temporary name *in the
  target's directory*; whoever writes (Python, matplotlib, a compiler) writes
  there; on success the file is flushed to disk (``fsync``) and renamed over the
  target (``os.replace``: atomic on POSIX within one file system), then the
  directory is synced; on any failure — a full disk, an exception, Ctrl-C — the
  temporary file is removed and the previous target, if any, is untouched.
* :func:`write_output` — text, bytes, or a callable that writes into a binary
  file object, through :func:`atomic_path`.

The helper sits in ``models/core`` because the dependency rule
(tests/test_layering.py) lets every layer — the front door, ``exec`` (job
files, compiled libraries) and below — import ``meshplan.models``, and it needs
nothing but the standard library.  A replaced file keeps its permission bits; a
new one gets ``0o666`` minus the umask, as ``open(path, "w")`` would give it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Union

from meshplan.models.core.errors import ModelError
from meshplan.models.core.files import not_regular

__all__ = ["OutputError", "check_output_path", "atomic_path", "write_output"]

Content = Union[str, bytes, Callable[[BinaryIO], object]]


class OutputError(ModelError):
    """An output file cannot be written (bad path, no such directory, full disk…); the previous file, if
    any, is unchanged."""


def _target(path: str | os.PathLike, what: str) -> Path:
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise OutputError(f"cannot write {what}: expected a file name, got {path!r}")
    text = os.fspath(path)
    if not text.strip():
        raise OutputError(f"cannot write {what}: the file name is empty")
    if "\0" in text:
        raise OutputError(f"cannot write {what}: the file name contains a NUL byte")
    p = Path(text)
    # write through a symbolic link to the file it names (replacing the link itself would surprise)
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def check_output_path(path: str | os.PathLike, *, what: str = "output file") -> Path:
    """Raise :class:`OutputError` unless ``path`` can be written as a regular file; returns it as a
    :class:`Path` (a symbolic link resolved to its target).  Leaves no file behind."""
    p = _target(path, what)
    shown = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise OutputError(f"cannot write {what} {shown!r}: {err.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"cannot write {what} {shown!r}: it is {not_regular(st.st_mode)}, not a regular file; give the "
                          "name of a file to write")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise OutputError(f"cannot write {what} {shown!r}: directory {str(parent)!r} does not exist; create it first")
    if not parent.is_dir():
        raise OutputError(f"cannot write {what} {shown!r}: {str(parent)!r} is not a directory")
    if st is not None and not os.access(p, os.W_OK):
        raise OutputError(f"cannot write {what} {shown!r}: the file is read-only; remove it or choose another name")
    probe = parent / f".{p.name[:40]}.{secrets.token_hex(4)}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        raise OutputError(f"cannot write {what} {shown!r}: cannot create a file in {str(parent)!r}: "
                          f"{err.strerror}") from None
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return p


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot open or sync a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, what: str = "output file", fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary name beside ``path`` (not yet created); when the block ends normally, sync the
    file written there and rename it over ``path``.  On any exception (or a missing file) the temporary
    file is removed, ``path`` is left as it was, and an :class:`OSError` becomes :class:`OutputError`."""
    target = check_output_path(path, what=what)
    shown = os.fspath(path)
    parent = target.parent if str(target.parent) else Path(".")
    existed = target.exists()
    tmp = parent / f".{target.name[:80]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        yield tmp
        if not tmp.exists():
            raise OutputError(f"cannot write {what} {shown!r}: nothing was written")
        if existed:
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            kept = "the previous file is unchanged" if existed else "no file was written"
            raise OutputError(f"cannot write {what} {shown!r}: {exc.strerror or exc}; {kept}") from exc
        raise
    if fsync:
        _fsync_dir(parent)


def write_output(path: str | os.PathLike, content: Content, *, what: str = "output file",
                 fsync: bool = True) -> Path:
    """Write ``content`` (text as UTF-8, bytes, or a callable that writes into a binary file object) to
    ``path`` whole or not at all (:func:`atomic_path`); returns ``path`` as a :class:`Path`."""
    with atomic_path(path, what=what, fsync=fsync) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content.encode("utf-8") if isinstance(content, str) else bytes(content))
    return Path(path)
