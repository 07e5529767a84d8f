"""Bad inputs for every ``meshplan`` verb, for the error-promise fuzz harness (tests/cli/test_fuzz.py).

A case is a verb, the kind of bad input it tries and its argv.  Argument slots that need a file on disk hold a
:class:`F` (a named file kind) that :func:`materialize` turns into a path under a scratch directory, so the case
list is known when pytest collects it.  Kinds are shared between verbs where the slot is the same (every reader
of a schedule gets the same broken schedules, every reader of a ``.py`` file the same broken programs).

Root cannot be denied a file by its mode bits, so "permission denied" is made honest three ways: the
unreadable ``/proc/self/mem`` (EIO on read), a FIFO nobody writes to (opening it would block for ever), and
files of mode 000 read with the effective uid dropped to ``nobody`` (``UNPRIVILEGED`` cases).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Case", "F", "O", "CASES", "materialize", "UNPRIVILEGED"]


@dataclass(frozen=True)
class F:
    """A file of kind ``kind`` whose name ends in ``suffix`` (made on demand by :func:`materialize`)."""

    kind: str
    suffix: str = ".json"


@dataclass(frozen=True)
class O:
    """An output path ``name`` under the scratch directory (not created)."""

    name: str


@dataclass(frozen=True)
class Case:
    verb: str
    kind: str
    argv: tuple
    #: environment variables set while the case runs (e.g. a lower limit, so a guard trips quickly)
    env: tuple = ()
    #: where stdout goes: "" (captured), "full" (/dev/full), "closed" (no descriptor 1), "pipe" (a pipe whose
    #: reader has gone); such cases run as subprocesses
    stdout: str = ""
    #: a phrase the error line must contain (the message says what is wrong, not just that something is)
    expect: str = ""

    @property
    def id(self) -> str:
        return f"{self.verb}-{self.kind}"


#: kinds that must be run with the effective uid dropped (a mode-000 file is readable by root)
UNPRIVILEGED = {"no-permission"}

_PROGRAM = "AllReduce slice=root form=InsideGroup\n"
_TEXT_FLAGS = ("--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "1", "--matrix", "[[2,1],[1,2]]")
_LOOP = "def f(N):\n    for i in range(N):\n        A[i] = B[i] + 1\n"


def _npy_with_nan() -> bytes:
    """A 64 x 64 diagonally dominant matrix (LU needs no pivoting) with one NaN, as .npy bytes."""
    import io

    import numpy as np

    a = np.random.default_rng(0).random((64, 64)) + 64 * np.eye(64)
    a[3, 5] = np.nan
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _plan(scratch: Path) -> dict:
    return json.loads((scratch / "plan.json").read_text())


def _edit(scratch: Path, fn) -> str:
    doc = _plan(scratch)
    fn(doc)
    return json.dumps(doc)


def _set(**kv):
    def fn(doc):
        doc.update(kv)
    return fn


def _first_program(fn):
    def apply(doc):
        fn(doc["placements"][0]["programs"][0])
    return apply


# -- file contents by kind: text (str) or bytes; scratch holds plan.json, a valid exported schedule ----------

def _contents(kind: str, suffix: str, scratch: Path) -> str | bytes:
    good = {".json": (scratch / "plan.json").read_text(), ".py": _LOOP, ".txt": _PROGRAM,
            ".toml": '[[levels]]\nname = "node"\nsize = 2\n', ".npy": b""}.get(suffix, "x")
    table = {
        "good": good,
        "binary": bytes(range(256)) * 16,
        "non-utf8": (good if isinstance(good, str) else "x").replace("e", "\xe9").encode("latin-1", "replace"),
        "utf16": good.encode("utf-16") if isinstance(good, str) else b"\xff\xfe\x00",
        "nul-bytes": b"\x00" * 4096,
        "empty": b"",
        "whitespace": b"  \n\t\n   ",
        "no-permission": good,
        "json-truncated": (scratch / "plan.json").read_text()[:200],
        "json-array": "[1, 2, 3]",
        "json-scalar": "42",
        "json-null": "null",
        "json-nested-list": "[" * 100_000 + "]" * 100_000,
        "json-nested-dict": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "json-empty-object": "{}",
        "json-bom": "\ufeff" + (scratch / "plan.json").read_text(),
        "json-1e400": _edit(scratch, _set(bytes_per_device=1e400)).replace("Infinity", "1e400"),
        "json-nan": _edit(scratch, _set(bytes_per_device=float("nan"))),
        "json-negative": _edit(scratch, _set(bytes_per_device=-1)),
        "json-bigint": _edit(scratch, _set(axes=[10**400, 1])),
        "json-axes-strings": _edit(scratch, _set(axes="2,2")),
        "json-null-step": _edit(scratch, _first_program(lambda p: p.__setitem__("steps", [None]))),
        "json-null-placement": _edit(scratch, lambda d: d["placements"].__setitem__(0, None)),
        "json-no-placements": _edit(scratch, _set(placements=[])),
        "json-huge-system": _edit(scratch, lambda d: d["system"]["levels"][0].__setitem__("size", 10**12)),
        "json-level-nan": _edit(scratch, lambda d: d["system"]["levels"][0]["links"][0].__setitem__(
            "bandwidth", float("nan"))),
        "json-steps-20000": _edit(scratch, _first_program(lambda p: p.__setitem__("steps", p["steps"] * 20_000))),
        "system-json-1e400": '{"levels": [{"name": "node", "size": 1e400}]}',
        "system-json-nan-size": '{"levels": [{"name": "node", "size": NaN}]}',
        "system-json-float-size": '{"levels": [{"name": "node", "size": 2.5}]}',
        "system-json-nested": '{"levels": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "system-json-huge": '{"levels": [{"name": "node", "size": 100000}, {"name": "gpu", "size": 100000}]}',
        "system-json-5000-levels": json.dumps({"levels": [{"name": f"l{i}", "size": 1} for i in range(5000)]}),
        "toml-bad": "[[levels\nname = ",
        "prog-garbage": "hello world\n\x7f\x1b[31m red\n",
        "prog-2000": _PROGRAM * 2000,
        "prog-20000": _PROGRAM * 20_000,
        "prog-9999": _PROGRAM * 9_999,
        "prog-long-line": "AllReduce " + "slice=root " * 100_000 + "\n",
        "prog-unknown-collective": "Teleport slice=root form=InsideGroup\n",
        "prog-json-garbage": "{ this is not json",
        "py-syntax": "def f(N:\n    for\n",
        "py-no-function": "x = 1\n",
        "py-5000-terms": "def f(N):\n    for i in range(N):\n        A[i] = " + " + ".join(["B[i]"] * 5000) + "\n",
        "py-nested-parens": "def f(N):\n    for i in range(N):\n        A[i] = " + "(" * 1000 + "B[i]"
                            + ")" * 1000 + "\n",
        "py-300-statements": "def f(N):\n    for i in range(N):\n" + "".join(
            f"        A{k}[i] = B[i] + A{k}[i]\n" for k in range(300)),
        "py-nested-60": "def f(N):\n" + "".join("    " * (k + 1) + f"for i{k} in range(N):\n" for k in range(60))
                        + "    " * 61 + "A[" + ",".join(f"i{k}" for k in range(60)) + "] = 1\n",
        "py-huge-const": "def f(N):\n    for i in range(10**400):\n        A[i] = B[i] + 1\n",
        "py-infinite-loop": "def f(n):\n    i = 0\n    while i < n:\n        A[i] = 1\n        i = i + 0\n",
        "py-recursion": "def f(n):\n    return f(n)\n",
        "py-lambda": "f = lambda N: [0 for i in range(N)]\n",
        "npy-nan": _npy_with_nan(),
        "py-unknown-count": "def f(n):\n    for i in range(n):\n        if A[i] > 0:\n            B[i] = 1\n",
        "npy-fortran-object": b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (2, 2), }"
                              + b" " * 50 + b"\n" + b"\x00" * 32,
        "npy-huge-shape": b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': "
                          b"(100000000, 100000000), }" + b" " * 26 + b"\n",
    }
    if kind not in table:
        raise KeyError(f"no contents for file kind {kind!r}")
    return table[kind]


def materialize(spec: F | O, scratch: Path) -> str:
    """The path of a file of ``spec``'s kind under ``scratch`` (made once), or of output ``spec``."""
    if isinstance(spec, O):
        return str(scratch / "out" / spec.name)
    special = {"directory": None, "fifo": None, "unreadable": "/proc/self/mem", "dev-zero": "/dev/zero",
               "dev-null": "/dev/null", "dev-full": "/dev/full", "missing": None, "missing-dir": None,
               "long-name": None, "dangling-symlink": None, "symlink-loop": None}
    name = f"{spec.kind}{spec.suffix}"
    path = scratch / name
    if spec.kind in special:
        if special[spec.kind]:
            return special[spec.kind]
        if spec.kind == "missing":
            return str(scratch / f"no-such-file{spec.suffix}")
        if spec.kind == "missing-dir":
            return str(scratch / "no" / "such" / f"dir{spec.suffix}")
        if spec.kind == "long-name":
            return str(scratch / ("x" * 5000 + spec.suffix))
        if not os.path.lexists(path):
            if spec.kind == "directory":
                path.mkdir()
            elif spec.kind == "fifo":
                os.mkfifo(path)
            elif spec.kind == "dangling-symlink":
                path.symlink_to(scratch / "nowhere")
            elif spec.kind == "symlink-loop":
                path.symlink_to(path)
        return str(path)
    if not path.exists():
        data = _contents(spec.kind, spec.suffix, scratch)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        if spec.kind in UNPRIVILEGED:
            path.chmod(0)
    return str(path)


# -- the cases -----------------------------------------------------------------------------------------------

#: kinds of a file that cannot be read as a file at all (any verb reading a file)
PATH_KINDS = ("binary", "non-utf8", "utf16", "nul-bytes", "empty", "whitespace", "directory", "fifo",
              "unreadable", "no-permission", "dev-zero", "dev-null", "missing", "missing-dir", "long-name",
              "dangling-symlink", "symlink-loop")
#: broken schedules (readers of ``solve placement --export``)
SCHEDULE_KINDS = ("json-truncated", "json-array", "json-scalar", "json-null", "json-nested-list",
                  "json-nested-dict", "json-empty-object", "json-bom", "json-1e400", "json-nan", "json-negative",
                  "json-bigint", "json-axes-strings", "json-null-step", "json-null-placement", "json-no-placements",
                  "json-huge-system", "json-level-nan", "json-steps-20000")
#: broken system files (--system FILE)
SYSTEM_KINDS = ("system-json-1e400", "system-json-nan-size", "system-json-float-size", "system-json-nested",
                "system-json-huge", "system-json-5000-levels", "json-nested-list", "json-array", "json-null")
#: broken Python loop programs (bound, count)
PY_KINDS = ("py-syntax", "py-no-function", "py-5000-terms", "py-nested-parens", "py-300-statements",
            "py-nested-60", "py-huge-const", "py-infinite-loop", "py-recursion", "py-lambda")
#: broken text reduction programs (check, run)
PROG_KINDS = ("prog-garbage", "prog-2000", "prog-20000", "prog-long-line", "prog-unknown-collective",
              "prog-json-garbage")

#: --system strings (solve, check, run, calibrate)
SYSTEM_STRINGS = {
    "system-5000-levels": ",".join(f"l{i}=1" for i in range(5000)),
    "system-huge": "node=100000,gpu=100000",
    "system-zero": "node=0,gpu=4",
    "system-negative": "node=-2,gpu=4",
    "system-1e400": "node=1e400",
    "system-empty": "",
    "system-equals": "=",
    "system-unicode": "n\u00f6de=2,gpu=2",
    "system-unknown-preset": "dgx-9000",
    "system-bad-bandwidth": "node=2:nic:nanGB/s,gpu=2",
    "system-unknown-kind": "node=2:wormhole:8GB/s,gpu=2",
    "system-duplicate-levels": "node=2,node=2",
    "system-long-name": "n" * 20_000 + "=2",
}
#: --axes strings (solve, check, run)
AXES_STRINGS = {
    "axes-20000-ones": ",".join(["1"] * 20_000),
    "axes-negative": "-2,-4",
    "axes-zero": "0,4",
    "axes-empty": "",
    "axes-float": "2.5,2",
    "axes-1e400": "1e400",
    "axes-huge": "1" + "0" * 5000,
    "axes-letters": "a,b",
}
#: numbers that are not numbers (float flags: --timeout, --time-limit, --idle-tolerance)
FLOAT_STRINGS = {"nan": "nan", "inf": "inf", "negative": "-1", "zero": "0", "1e400": "1e400", "letters": "soon"}
#: sizes (--bytes)
BYTES_STRINGS = {"bytes-1e400": "1e400", "bytes-nan": "nan", "bytes-negative": "-1", "bytes-zero": "0",
                 "bytes-huge": "9" * 400 + "GiB", "bytes-unit": "4 parsecs", "bytes-fraction": "0.1"}
#: integers of count flags (--np, --repeats, …)
INT_STRINGS = {"zero": "0", "negative": "-1", "huge": str(10**30), "float": "2.5", "letters": "many"}


def _file_cases(verb: str, argv_of, kinds, suffix: str) -> list[Case]:
    return [Case(verb, f"{kind}{suffix.replace('.', '-')}", tuple(argv_of(F(kind, suffix)))) for kind in kinds]


def _flag_cases(verb: str, base: tuple, flag: str, table: dict, prefix: str = "") -> list[Case]:
    return [Case(verb, f"{prefix}{kind}", (*base, flag, value)) for kind, value in table.items()]


def _schedule_reader(verb: str, extra: tuple, skip: tuple = ()) -> list[Case]:
    """A verb whose first argument is a schedule: every broken file, every broken schedule (but ``skip``),
    bad selections."""
    plan = F("good")
    cases = _file_cases(verb, lambda f: (verb, f, *extra), PATH_KINDS, ".json")
    cases += _file_cases(verb, lambda f: (verb, f, *extra), [k for k in SCHEDULE_KINDS if k not in skip], ".json")
    for kind, sel in (("placement-negative", ("--placement", "-1")), ("placement-huge", ("--placement", "10" * 30)),
                      ("placement-letters", ("--placement", "x")), ("program-negative", ("--program", "-2,-4")),
                      ("program-huge", ("--program", "99999")), ("placement-empty", ("--placement", ""))):
        cases.append(Case(verb, kind, (verb, plan, *extra, *sel)))
    return cases


def _cases() -> list[Case]:
    cases: list[Case] = []
    good_system = ("--system", "node=2,gpu=2")

    # solve placement
    base = ("solve", "placement", "--axes", "2,2", "--reduce", "1", "--max-size", "2", "--json")
    solve = ("solve", "placement", *good_system, "--reduce", "1", "--max-size", "2", "--json")
    cases += _file_cases("solve", lambda f: (*base, "--system", f), PATH_KINDS + SYSTEM_KINDS, ".json")
    cases += _file_cases("solve", lambda f: (*base, "--system", f), ("binary", "non-utf8", "toml-bad"), ".toml")
    cases += _flag_cases("solve", base, "--system", SYSTEM_STRINGS)
    cases += _flag_cases("solve", solve, "--axes", AXES_STRINGS)
    cases += _flag_cases("solve", (*base, *good_system), "--bytes", BYTES_STRINGS)
    cases += [Case("solve", k, (*base[:-5], *good_system, *a, "--json")) for k, a in (
        ("reduce-out-of-range", ("--reduce", "5")), ("reduce-negative", ("--reduce", "-1")),
        ("reduce-empty", ("--reduce", "")), ("max-size-negative", ("--reduce", "1", "--max-size", "-1")),
        ("max-size-huge", ("--reduce", "1", "--max-size", "1000000000")),
        ("pin-garbage", ("--reduce", "1", "--pin", "%%%")), ("pin-1e400", ("--reduce", "1", "--pin", "0:gpu=1e400")),
        ("inside-bad-axis", ("--reduce", "1", "--inside", "9:gpu")), ("top-zero", ("--reduce", "1", "--top", "0")),
        ("export-directory", ("--reduce", "1", "--export", F("directory"))),
    )]
    cases.append(Case("solve", "system-huge-with-its-axes", ("solve", "placement", "--system", "node=100000,gpu=100000",
                                                             "--axes", "100000,100000", "--reduce", "0", "--json")))
    cases.append(Case("solve", "no-question", ("solve",)))

    # check
    text = ("check",)
    cases += _schedule_reader("check", ("--no-proof", "--json"))
    cases += _file_cases("check", lambda f: (*text, f, *_TEXT_FLAGS, "--no-proof", "--json"),
                         ("binary", "non-utf8", "nul-bytes", "fifo", "unreadable", "no-permission") + PROG_KINDS,
                         ".txt")
    prog = F("prog-2000", ".txt")
    cases += _flag_cases("check", (*text, F("good", ".txt"), "--axes", "2,2", "--reduce", "1", "--no-proof",
                                   "--json"), "--system", SYSTEM_STRINGS, "text-")
    cases += _flag_cases("check", (*text, F("good", ".txt"), *good_system, "--reduce", "1", "--no-proof", "--json"),
                         "--axes", AXES_STRINGS, "text-")
    cases += [Case("check", "text-bytes-nan", (*text, prog, *_TEXT_FLAGS, "--bytes", "nan")),
              Case("check", "text-matrix-nested", (*text, prog, *_TEXT_FLAGS[:-2], "--matrix", "[" * 50_000)),
              Case("check", "text-matrix-1e400", (*text, prog, *_TEXT_FLAGS[:-2], "--matrix", "[[1e400]]"))]

    # run: every case must fail before mpiexec starts
    cases += _schedule_reader("run", ("--repeats", "1", "--json"), skip=("json-bom",))  # a valid schedule would run
    cases += _file_cases("run", lambda f: ("run", f, *_TEXT_FLAGS, "--json"),
                         ("binary", "non-utf8", "fifo", "prog-garbage", "prog-20000"), ".txt")
    plan = F("good")
    cases += _flag_cases("run", ("run", plan, "--json"), "--timeout", FLOAT_STRINGS, "timeout-")
    cases += _flag_cases("run", ("run", plan, "--json"), "--np", INT_STRINGS, "np-")
    cases += _flag_cases("run", ("run", plan, "--json"), "--repeats", INT_STRINGS, "repeats-")
    cases += _flag_cases("run", ("run", plan, "--json"), "--bytes", {**BYTES_STRINGS, "bytes-1TiB": "1TiB"})

    # calibrate: every case must fail before mpiexec starts
    cal = ("calibrate", "--json")
    cases += _flag_cases("calibrate", cal, "--np", {**INT_STRINGS, "100000": "100000"}, "np-")
    cases += _flag_cases("calibrate", (*cal, "--np", "4"), "--system", SYSTEM_STRINGS)
    cases += _file_cases("calibrate", lambda f: (*cal, "--np", "4", "--system", f),
                         ("binary", "non-utf8", "directory", "fifo", "unreadable", "json-nested-list",
                          "system-json-1e400", "system-json-huge"), ".json")
    cases += _flag_cases("calibrate", (*cal, "--np", "4"), "--bytes", {**BYTES_STRINGS, "bytes-1TiB": "1TiB"})
    cases += _flag_cases("calibrate", (*cal, "--np", "4"), "--timeout", FLOAT_STRINGS, "timeout-")
    cases += _flag_cases("calibrate", (*cal, "--np", "4"), "--repeats", INT_STRINGS, "repeats-")
    cases += [Case("calibrate", "system-mismatch", (*cal, "--np", "4", "--system", "node=3,gpu=3")),
              Case("calibrate", "output-dev-full", (*cal, "--np", "4", "--bytes", "nan", "-o", "/dev/full"))]

    # export
    cases += _schedule_reader("export", ("--format", "jax-mesh", "--json"))
    cases += [Case("export", k, ("export", plan, *a)) for k, a in (
        ("format-unknown", ("--format", "onnx")),
        ("axis-names-20000", ("--format", "jax-mesh", "--axis-names", ",".join(f"a{i}" for i in range(20_000)))),
        ("axis-names-duplicate", ("--format", "jax-mesh", "--axis-names", "a,a")),
        ("axis-names-empty", ("--format", "jax-mesh", "--axis-names", ",")),
        ("axis-names-quote", ("--format", "jax-mesh", "--axis-names", "a',b\"")),
        ("output-directory", ("--format", "mpi4py", "-o", F("directory"))),
        ("output-dev-full", ("--format", "mpi4py", "-o", "/dev/full")),
    )]

    # show
    cases += _schedule_reader("show", ("--png", O("out.png"), "--json"))
    cases += [Case("show", k, ("show", plan, *a)) for k, a in (
        ("png-unknown-extension", ("--png", O("x.wibble"))), ("png-dev-full", ("--png", "/dev/full")),
        ("png-directory", ("--png", F("directory"))), ("png-empty", ("--png", "")),
        ("dpi-zero", ("--png", O("d0.png"), "--dpi", "0")),
        ("dpi-negative", ("--png", O("d1.png"), "--dpi", "-5")),
        ("dpi-huge", ("--png", O("d2.png"), "--dpi", "1000000000")),
    )]

    # redistribute
    red = ("redistribute",)
    mesh = ("--mesh", "x=4,y=6", "--json")
    for kind, (src, dst, m) in {
        "type-garbage": ("hello", "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-nested": ("[" * 50_000, "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-5000-dims": ("[" + ",".join(["1"] * 5000) + "]", "[" + ",".join(["1"] * 5000) + "]", "x=4,y=6"),
        "type-1e400": ("[1e400{x}12,2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-negative": ("[-3{x}12,2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-huge": ("[3{x}" + "9" * 400 + ",2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-unknown-axis": ("[3{z}12,2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
        "type-unicode": ("[3{\u00e9}12]", "[12]", "\u00e9=4"),
        "type-mismatch": ("[3{x}12,2{y}12]", "[12]", "x=4,y=6"),
        "type-empty": ("", "", "x=4,y=6"),
        "mesh-zero": ("[12]", "[12]", "x=0"),
        "mesh-negative": ("[12]", "[12]", "x=-4"),
        "mesh-1e400": ("[12]", "[12]", "x=1e400"),
        "mesh-5000-axes": ("[12]", "[12]", ",".join(f"a{i}=1" for i in range(5000))),
        "mesh-huge": ("[12]", "[12]", "x=100000,y=100000"),
        "mesh-duplicate": ("[12]", "[12]", "x=2,x=2"),
        "mesh-empty": ("[12]", "[12]", ""),
        "mesh-garbage": ("[12]", "[12]", "{{{"),
    }.items():
        cases.append(Case("redistribute", kind, (*red, src, dst, "--mesh", m, "--json")))
    good_types = ("[3{x}12,2{y}12]", "[2{y}12,3{x}12]")
    cases += [Case("redistribute", k, (*red, *good_types, *mesh, *a)) for k, a in (
        ("dtype-unknown", ("--dtype", "f128")), ("np-mismatch", ("--run", "--np", "3")),
        ("np-negative", ("--run", "--np", "-1")), ("np-huge", ("--run", "--np", "100000")),
        ("repeats-negative", ("--run", "--repeats", "-1")), ("repeats-huge", ("--run", "--repeats", str(10**30))),
        ("np-zero", ("--run", "--np", "0")), ("repeats-zero", ("--run", "--repeats", "0")),
    )]
    cases += [Case("redistribute", k, (*red, *a, "--json")) for k, a in (
        ("run-mesh-huge", ("[10000{x}10000]", "[10000]", "--mesh", "x=10000", "--run")),
        ("run-data-huge", ("[2{x}" + str(2**40) + "]", "[" + str(2**40) + "]", "--mesh", "x=2", "--run")),
        ("src-dash", ("-[12]", "[12]", "--mesh", "x=2")),
        ("type-braces-only", ("{x}", "{x}", "--mesh", "x=2")),
        ("type-size-not-divisible", ("[5{x}12]", "[12]", "--mesh", "x=2")),
        ("type-whitespace", ("  [ 3 { x } 12 ]  ", "[12]", "--mesh", "x=4")),
        ("mesh-unicode-digits", ("[12]", "[12]", "--mesh", "x=\u0664")),
    )]

    # bound
    cases += _file_cases("bound", lambda f: ("bound", f, "--no-tiles", "--json"), PATH_KINDS + PY_KINDS, ".py")
    loop = F("good", ".py")
    cases += [Case("bound", k, ("bound", *a)) for k, a in (
        ("einsum-garbage", ("--einsum", "ij,jk->ik->", "--json")),
        ("einsum-nested", ("--einsum", "(" * 5000, "--json")),
        ("einsum-5000-indices", ("--einsum", "".join(chr(0x4e00 + i) for i in range(5000)) + "->", "--json")),
        ("einsum-unicode", ("--einsum", "\u00e9\u00e8,\u00e8\u00e0->\u00e9\u00e0", "--no-tiles", "--json")),
        ("einsum-empty", ("--einsum", "", "--json")),
        ("both-inputs", (loop, "--einsum", "ij->i")),
        ("no-input", ("--json",)),
        ("params-1e400", (loop, "--params", "N=1e400,S=10")), ("params-negative", (loop, "--params", "N=-4")),
        ("params-huge", ("--einsum", "ij,jk->ik", "--params", f"N_i={10**400},N_j=4,N_k=4,S=16", "--json")),
        ("params-garbage", (loop, "--params", "===")),
        ("function-missing", (loop, "--function", "nope")),
        ("time-limit-nan", ("--einsum", "ij,jk->ik", "--params", "N_i=64,N_j=64,N_k=64,S=64", "--time-limit", "nan")),
        ("time-limit-inf", ("--einsum", "ij,jk->ik", "--params", "N_i=64,N_j=64,N_k=64,S=64", "--time-limit", "inf")),
        ("time-limit-negative", ("--einsum", "ij,jk->ik", "--time-limit", "-1")),
        ("time-limit-1e400", ("--einsum", "ij,jk->ik", "--time-limit", "1e400")),
    )]

    # count
    cases += _file_cases("count", lambda f: ("count", f, "--json"), PATH_KINDS + PY_KINDS, ".py")
    cases += [Case("count", k, ("count", *a)) for k, a in (
        ("params-garbage", (loop, "--params", "n=")), ("params-negative", (loop, "--params", "N=-1")),
        ("params-unknown", (loop, "--params", "zz=3")), ("bounds-garbage", (loop, "--bounds", "u1=..")),
        ("bounds-reversed", (loop, "--bounds", "u1=5..1")), ("bounds-1e400", (loop, "--bounds", "u1=0..1e400")),
        ("procs-bad-name", (loop, "--procs", "1p")), ("rank-bad-name", (loop, "--rank", "")),
        ("verify-no-params", (loop, "--verify")),
        ("verify-huge", (loop, "--verify", "--params", f"N={10**12}")),
        ("function-missing", (loop, "--function", "nope")),
    )]
    cases.append(Case("count", "verify-infinite", ("count", F("py-infinite-loop", ".py"), "--verify", "--params",
                                                   "n=3,u1=2"), env=(("MESHPLAN_MAX_ITERATIONS", "20000"),)))

    # tensor halo / check
    halo = ("tensor", "halo", "--json")
    good = {"--partition": "1,1,4", "--shape": "1,1,10", "--kernel": "3"}
    for flag, table in (("--partition", {"negative": "-2,-4", "zero": "0,1,4", "20000-ones": ",".join(["1"] * 20_000),
                                         "huge": f"1,1,{10**9}", "letters": "a,b", "empty": "",
                                         "too-many": "1,1,11", "rank-mismatch": "1,4"}),
                        ("--shape", {"zero": "1,1,0", "negative": "1,1,-10", "huge": f"1,1,{10**30}",
                                     "1e400": "1,1,1e400", "20000-dims": ",".join(["1"] * 20_000)}),
                        ("--kernel", {"zero": "0", "negative": "-3", "huge": str(10**30), "nan": "nan",
                                      "too-big": "11"}),
                        ("--stride", {"zero": "0", "negative": "-1"}),
                        ("--padding", {"negative": "-1", "huge": str(10**30)}),
                        ("--dilation", {"zero": "0", "negative": "-2"})):
        for kind, value in table.items():
            argv = dict(good, **{flag: value})
            cases.append(Case("tensor", f"halo{flag[1:]}-{kind}", (*halo, *(x for kv in argv.items() for x in kv))))
    cases += _flag_cases("tensor", ("tensor", "check", "--json"), "--np", {**INT_STRINGS, "100000": "100000"},
                         "check-np-")
    cases += _flag_cases("tensor", ("tensor", "check", "--np", "2", "--json"), "--timeout", FLOAT_STRINGS,
                         "check-timeout-")
    cases += [Case("tensor", "check-suite-unknown", ("tensor", "check", "--np", "2", "--suite", "everything")),
              Case("tensor", "no-object", ("tensor",))]

    # matmul
    for kind, mnk in (("negative", ("-4", "4", "4")), ("zero", ("0", "4", "4")), ("huge", (str(10**30),) * 3),
                      ("float", ("2.5", "4", "4")), ("1e400", ("1e400", "4", "4")), ("letters", ("m", "n", "k"))):
        cases.append(Case("matmul", f"mnk-{kind}", ("matmul", *mnk, "--np", "4", "--json")))
    mm = ("matmul", "64", "64", "64", "--json")
    cases += _flag_cases("matmul", mm, "--np", {**INT_STRINGS, "1000000": "1000000"}, "np-")
    cases += _flag_cases("matmul", (*mm, "--np", "4"), "--idle-tolerance", FLOAT_STRINGS, "idle-tolerance-")
    cases += _flag_cases("matmul", (*mm, "--np", "4"), "--memory", INT_STRINGS, "memory-")
    cases += [Case("matmul", k, (*mm, "--np", "4", *a)) for k, a in (
        ("baseline-unknown", ("--baseline", "cannon")), ("repeats-zero", ("--repeats", "0")),
        ("run-repeats-huge", ("--run", "--repeats", str(10**30))), ("run-baseline-unknown", ("--run", "--baseline", "x")),
        ("dtype-unknown", ("--dtype", "f128")), ("layout-unknown", ("--layout", "cyclic")),
    )]
    cases += [Case("matmul", "run-np-huge", ("matmul", "64", "64", "64", "--np", "100000", "--run", "--json")),
              Case("matmul", "run-mnk-huge", ("matmul", *(str(10**6),) * 3, "--np", "4", "--run", "--json")),
              Case("matmul", "mnk-overflow", ("matmul", *(str(2**62),) * 3, "--np", "7", "--json"))]

    # factor
    fa = ("factor", "lu", "64", "--np", "4", "--json")
    for kind, n in (("negative", "-4"), ("zero", "0"), ("huge", str(10**30)), ("float", "2.5"), ("letters", "n")):
        cases.append(Case("factor", f"N-{kind}", ("factor", "lu", n, "--np", "4", "--json")))
    cases.append(Case("factor", "kind-unknown", ("factor", "qr", "64", "--np", "4")))
    cases += _flag_cases("factor", fa[:3] + ("--json",), "--np", {**INT_STRINGS, "1000000": "1000000"}, "np-")
    cases += _flag_cases("factor", fa, "--memory", INT_STRINGS, "memory-")
    cases += _flag_cases("factor", fa, "--block", INT_STRINGS, "block-")
    cases += _flag_cases("factor", fa, "--grid", {"negative": "-2,-4,1", "zero": "0,0,0", "20000": ",".join(
        ["1"] * 20_000), "letters": "a,b,c", "mismatch": "3,3,3", "empty": ""}, "grid-")
    cases += _file_cases("factor", lambda f: (*fa, "--run", "--input", f),
                         ("binary", "empty", "directory", "fifo", "unreadable", "no-permission", "dev-zero",
                          "missing", "npy-fortran-object", "npy-huge-shape"), ".npy")
    cases += [Case("factor", k, (*fa, *a)) for k, a in (
        ("input-without-run", ("--input", F("binary", ".npy"))), ("seed-negative", ("--seed", "-1")),
        ("run-np-huge", ("--run",)), ("repeats-negative", ("--repeats", "-1")),
        ("baseline-unknown", ("--baseline", "magma")),
    )]
    cases[-3] = Case("factor", "run-np-huge", ("factor", "lu", "64", "--np", "100000", "--run", "--json"))

    # the error contract of the first-run probes: a full, closed or broken stdout; input problems caught before
    # mpiexec starts; one validation per flag; a missing file is "not found"
    for verb, argv in (("matmul", ("matmul", "64", "64", "64", "--np", "4", "--json")),
                       ("factor", ("factor", "lu", "64", "--np", "4", "--json")),
                       ("tensor", ("tensor", "halo", "--partition", "2,2", "--shape", "8,8", "--kernel", "3", "--json")),
                       ("redistribute", ("redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4", "--json"))):
        cases.append(Case(verb, "stdout-full", argv, stdout="full", expect="No space left on device"))
    cases += [Case("solve", "stdout-closed", ("solve", "placement", *_TEXT_FLAGS[:6]), stdout="closed",
                   expect="standard output is closed"),
              Case("tensor", "stdout-broken-pipe", ("tensor", "halo", "--partition", "1,1,4000", "--shape",
                                                     "1,1,4000", "--kernel", "3", "--json"), stdout="pipe"),
              Case("factor", "run-seed-negative", (*fa, "--run", "--seed", "-1"), expect="--seed"),
              Case("factor", "run-input-nan", (*fa, "--run", "--input", F("npy-nan", ".npy")),
                   expect="NaN or infinity"),
              Case("factor", "repeats-zero", (*fa, "--repeats", "0"), expect="at least 1"),
              Case("factor", "run-repeats-zero", (*fa, "--run", "--repeats", "0"), expect="at least 1"),
              Case("matmul", "baseline-empty", (*mm, "--np", "4", "--baseline", ""), expect="no baseline"),
              Case("matmul", "baseline-empty-name", (*mm, "--np", "4", "--baseline", "2d,,cosma"),
                   expect="no baseline"),
              Case("factor", "baseline-empty", (*fa, "--baseline", ""), expect="no baseline"),
              Case("redistribute", "baseline-empty", ("redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4",
                                                      "--baseline", ""), expect="no baseline"),
              Case("count", "path-not-found", ("count", "no_such_file.py", "--json"), expect="not found"),
              Case("count", "bounds-reversed-unknown", ("count", F("py-unknown-count", ".py"), "--bounds", "u1=5..1",
                                                        "--json"), expect="u1"),
              Case("check", "prog-9999-steps", ("check", F("prog-9999", ".txt"), *_TEXT_FLAGS, "--json")),
              Case("tensor", "halo-100000-ranks", ("tensor", "halo", "--partition", "1,1,100000", "--shape",
                                                   "1,1,100000", "--kernel", "3", "--json"),
                   expect="MESHPLAN_MAX_HALO_TRANSFERS"),
              Case("tensor", "halo-10-dims", ("tensor", "halo", "--partition", ",".join(["2"] * 10), "--shape",
                                              ",".join(["4"] * 10), "--kernel", "3", "--json"),
                   expect="MESHPLAN_MAX_HALO_TRANSFERS")]

    # testbed: every bad input is refused before a namespace is made (the cases run under a prefix and state
    # directory of their own, so even a case wrongly accepted could not touch a real testbed)
    tb_env = (("MESHPLAN_TESTBED_PREFIX", "mplfz-"), ("MESHPLAN_TESTBED_DIR", "/tmp/meshplan-testbed-fuzz"))
    up = ("testbed", "up", "--json")
    tb = _flag_cases("testbed", up + ("--link", "1Gbit,50us"), "--nodes",
                     {**INT_STRINGS, "one": "1", "over-limit": "65"}, prefix="nodes-")
    tb += _flag_cases("testbed", up + ("--nodes", "4"), "--link", {
        "empty": "", "letters": "fast", "three-parts": "1Gbit,50us,1", "negative": "-1Gbit", "zero": "0bit",
        "nan": "nanGbit", "1e400": "1e400Gbit", "too-slow": "1bit", "too-fast": "1Tbit", "delay-letters":
        "1Gbit,soon", "delay-negative": "1Gbit,-5us", "delay-1e400": "1Gbit,1e400s", "unicode": "1Gb\u00edt"},
        prefix="link-")
    tb += _flag_cases("testbed", up + ("--nodes", "4", "--uplink", "250Mbit,50us"), "--racks",
                      {"zero": "0", "negative": "-1", "more-than-nodes": "8", "not-dividing": "3",
                       "letters": "two"}, prefix="racks-")
    tb += [Case("testbed", "uplink-without-racks", (*up, "--nodes", "4", "--uplink", "250Mbit,50us")),
           Case("testbed", "racks-without-uplink", (*up, "--nodes", "4", "--racks", "2")),
           Case("testbed", "uplink-letters", (*up, "--nodes", "4", "--racks", "2", "--uplink", "slow")),
           Case("testbed", "nodes-missing", up), Case("testbed", "unknown-action", ("testbed", "frobnicate")),
           Case("testbed", "down-unknown-flag", ("testbed", "down", "--nodes", "2"))]
    cases += [Case(c.verb, c.kind, c.argv, env=tb_env) for c in tb]

    # any verb
    cases += [Case("meshplan", "unknown-verb", ("frobnicate",)), Case("meshplan", "no-verb", ()),
              Case("meshplan", "unicode-verb", ("s\u00f6lve",))]
    return cases


CASES: list[Case] = _cases()
