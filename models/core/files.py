"""Input files read whole, or refused with one actionable message (DESIGN.md, "Errors").

Every file meshplan reads from a user — system files, schedules, reduction programs, Python loop programs —
goes through :func:`read_text` (or :func:`read_json`), so each reader refuses the same inputs the same way:

* not a regular file: missing, a directory, a named pipe (opening one would block until someone writes to it),
  a device (``/dev/zero`` never ends), a dangling symlink or a symlink loop, a name too long for the file
  system — a :class:`ModelError` naming the path and what it is;
* a file that cannot be read (no permission, an I/O error such as ``/proc/self/mem``'s) — the system's reason;
* larger than :data:`MAX_INPUT_BYTES` (raise it with ``MESHPLAN_MAX_INPUT_BYTES``);
* not UTF-8 text (a binary file, Latin-1, UTF-16) or containing NUL bytes — a :class:`ParseError` with the line
  and column of the first bad byte.  A UTF-8 byte-order mark is skipped.

:func:`read_json` adds JSON decoding: malformed JSON gives the line and column, nesting deeper than
Python's decoder can follow (``[[[[…`` 100,000 deep) a :class:`ParseError` instead of a ``RecursionError``.
The module sits in ``models/core`` beside :mod:`~meshplan.models.core.outputs` so every layer may use it.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from meshplan.models.core.errors import ModelError, ParseError, quote
from meshplan.models.core.limits import LIMITS, limit

__all__ = ["MAX_INPUT_BYTES", "max_input_bytes", "not_regular", "read_text", "read_json", "loads"]

#: the largest input file read (bytes) by default; ``MESHPLAN_MAX_INPUT_BYTES`` overrides it
MAX_INPUT_BYTES = LIMITS["input_bytes"].default


def max_input_bytes() -> int:
    """:data:`MAX_INPUT_BYTES`, or the value of ``MESHPLAN_MAX_INPUT_BYTES`` when set to a positive integer
    (the ``input_bytes`` entry of :mod:`meshplan.models.core.limits`)."""
    return limit("input_bytes")


def not_regular(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file ("a directory", "a named pipe",
    …), else ``None``: readers (here) and writers (:mod:`meshplan.models.core.outputs`) refuse the same kinds."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_text(path: str | os.PathLike, *, what: str = "input file") -> str:
    """The text of the UTF-8 file at ``path``; any other input is a :class:`ModelError` (or
    :class:`ParseError` for bytes that are not UTF-8 text) naming ``what`` and the path."""
    name = os.fspath(path)
    shown = quote(name, 120)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        hint = " (a symlink to nothing)" if os.path.islink(name) else ""
        raise ModelError(f"cannot read {what} {shown}: not found{hint}") from None
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ModelError(f"cannot open {what} {shown}: {reason}") from None
    kind = not_regular(st.st_mode)
    if kind is not None:
        raise ModelError(f"{what} {shown} is {kind}, not a file; give the path of a file")
    most = max_input_bytes()
    if st.st_size > most:
        raise ModelError(f"{what} {shown} has {st.st_size:,} bytes, more than the limit of {most:,}; "
                         "set MESHPLAN_MAX_INPUT_BYTES to read larger files")
    try:
        with open(name, "rb") as fh:
            data = fh.read(most + 1)
    except OSError as err:
        raise ModelError(f"cannot read {what} {shown}: {err.strerror or err}") from None
    if len(data) > most:
        raise ModelError(f"{what} {shown} has more than {most:,} bytes; set MESHPLAN_MAX_INPUT_BYTES to "
                         "read larger files")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line, column = _position(data, err.start)
        raise ParseError(f"{what} is not UTF-8 text (byte 0x{data[err.start]:02x}); is it a binary file? "
                         "Save it as UTF-8", line=line, column=column, source=name) from None
    if "\x00" in text:
        line, column = _position(data, data.index(b"\x00"))
        raise ParseError(f"{what} contains NUL bytes; is it a binary file?", line=line, column=column,
                         source=name)
    return text


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    return line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def read_json(path: str | os.PathLike, *, what: str = "JSON file") -> Any:
    """The parsed JSON of the file at ``path`` (:func:`read_text`, then :func:`loads`)."""
    return loads(read_text(path, what=what), source=os.fspath(path))


def loads(text: str, *, source: str | None = None) -> Any:
    """``json.loads`` with :class:`ParseError` for malformed or too deeply nested JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ParseError(f"malformed JSON: {err.msg}", line=err.lineno, column=err.colno, source=source) from None
    except RecursionError:
        raise ParseError("JSON nested too deeply (more than about a thousand levels of [ or {); meshplan's "
                         "files nest a few levels", source=source) from None

