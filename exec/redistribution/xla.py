"""Real XLA as a yardstick: compile a resharding with jax and read the collectives of its HLO.

The paper's §8 compares the synthesised programs with the redistributions the
XLA SPMD partitioner generates.  This module does the same on this machine:

* :func:`compile_reshardings` compiles ``jax.jit(lambda x: x, out_shardings=dst)``
  for an input placed with the source sharding, on ``N`` fake CPU devices
  (``XLA_FLAGS=--xla_force_host_platform_device_count=N``, one subprocess per
  device count so many problems share one interpreter), and returns the compiled
  HLO text of each;
* :func:`read_hlo` reads that text: every ``all-gather``, ``all-to-all``,
  ``collective-permute``, ``reduce-scatter``, ``all-reduce`` and ``dynamic-slice``
  with its per-device shapes and device groups (all three replica-group spellings:
  explicit lists, iota ``[G,S]<=[…]T(…)`` and mesh axes ``mesh[…] {axes}``), and
  the largest value any device holds (the height, Def. 4.4);
* :attr:`HloReport.cost` prices the collectives with Fig. 11.  Fig. 11 has no
  ``reduce-scatter`` or ``all-reduce``; they are priced as App. B prices the others
  (every device sends its whole buffer once): reduce-scatter ``localsize(τ1)``,
  all-reduce = reduce-scatter + all-gather = ``2·localsize``.

Conventions (checked against jax): devices of mesh ``x=4,y=2`` are
``jax.devices()[d]`` reshaped row-major, so partition id = meshplan device number;
a dimension ``c{a0,…,ak}n`` (axes minor to major) is the PartitionSpec entry
``(ak, …, a0)``.  jax is imported only inside the subprocess (an optional dependency).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from meshplan.models.core.errors import MeshplanError
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import DistType

__all__ = ["HloCollective", "HloReport", "read_hlo", "partition_spec", "compile_reshardings",
           "xla_reports", "jax_available", "COLLECTIVES"]

#: the HLO opcodes read as communication (``dynamic-slice`` is local, cost 0)
COLLECTIVES = ("all-gather", "all-to-all", "collective-permute", "reduce-scatter", "all-reduce", "dynamic-slice")


@dataclass(frozen=True, slots=True)
class HloCollective:
    """One collective of the compiled HLO; sizes are elements per device."""

    op: str
    operand: int
    result: int
    groups: tuple[tuple[int, ...], ...]     # device groups; (source, target) pairs for collective-permute
    dims: tuple[int, ...] = ()              # dimensions= attribute (all-gather, all-to-all, reduce-scatter)

    @property
    def cost(self) -> int:
        """Elements per device moved, Fig. 11 (and its App. B extension to reductions)."""
        if self.op in ("all-to-all", "collective-permute", "reduce-scatter"):
            return self.operand
        if self.op == "all-gather":
            return self.result
        if self.op == "all-reduce":
            return 2 * self.operand
        return 0

    @property
    def wire(self) -> int:
        """Elements the busiest device sends on the wire: an all-gather its operand to each of the ``g−1``
        others, an all-to-all or reduce-scatter all but its own ``1/g``, an all-reduce twice that (reduce-scatter
        then all-gather), a collective-permute its operand if any device receives from another."""
        if self.op == "collective-permute":
            return self.operand if self.moved else 0
        return self._per_member(self.group_size)

    def _per_member(self, g: int) -> int:
        """Elements one member of a group of ``g`` sends in this (group) collective."""
        if self.op == "all-gather":
            return self.operand * (g - 1)
        if self.op in ("all-to-all", "reduce-scatter"):
            return self.operand - self.operand // g if g else 0
        if self.op == "all-reduce":
            return 2 * (self.operand - self.operand // g) if g else 0
        return 0

    @property
    def group_size(self) -> int:
        return 2 if self.op == "collective-permute" else (len(self.groups[0]) if self.groups else 0)

    def sent(self, devices: int) -> np.ndarray:
        """Elements each of ``devices`` devices sends on the wire in this collective (the per-device form of
        :attr:`wire`): a device outside every group, or a collective-permute pair ``(d, d)``, sends nothing."""
        out = np.zeros(devices, dtype=np.int64)
        if self.op == "collective-permute":
            for s, t in self.groups:
                if s != t:
                    out[s] += self.operand
            return out
        for g in self.groups:
            out[list(g)] += self._per_member(len(g))
        return out

    @property
    def moved(self) -> int:
        """collective-permute: number of devices that receive from another device."""
        return sum(1 for s, t in self.groups if s != t) if self.op == "collective-permute" else 0

    def __str__(self) -> str:
        if self.op == "dynamic-slice":
            return f"dynamic-slice {self.operand}->{self.result}"
        g = f"{self.moved} of {len(self.groups)} pairs move" if self.op == "collective-permute" else \
            f"{len(self.groups)} groups of {self.group_size}"
        return f"{self.op}[{g}] {self.operand}->{self.result}"


@dataclass(frozen=True, slots=True)
class HloReport:
    """What the compiled resharding does, per device: its collectives and the height."""

    collectives: tuple[HloCollective, ...]
    height: int                 # elements of the largest value of the entry computation (Def. 4.4)
    input: int                  # elements of the parameter
    output: int                 # elements of the result
    partitions: int = 0         # num_partitions of the module (0: not stated)

    @property
    def cost(self) -> int:
        return sum(c.cost for c in self.collectives)

    @property
    def sent(self) -> np.ndarray:
        """Elements each device sends on the wire, summed over the collectives (:meth:`HloCollective.sent`)."""
        n = self.partitions or 1 + max((d for c in self.collectives for g in c.groups for d in g), default=0)
        return sum((c.sent(n) for c in self.collectives), np.zeros(n, dtype=np.int64))

    @property
    def wire(self) -> int:
        """Elements the busiest device sends on the wire over the whole program (the largest of :attr:`sent`;
        at most the sum of the collectives' :attr:`HloCollective.wire`, less where the busiest device of one
        collective is not the busiest of another)."""
        return int(self.sent.max(initial=0))

    @property
    def total(self) -> int:
        """Elements all devices together send on the wire (the sum of :attr:`sent`)."""
        return int(self.sent.sum())

    @property
    def communication(self) -> tuple[HloCollective, ...]:
        return tuple(c for c in self.collectives if c.op != "dynamic-slice")

    def ops(self) -> tuple[str, ...]:
        return tuple(c.op for c in self.communication)


# -- HLO text -------------------------------------------------------------------------------------
_ARRAY = re.compile(r"\b(?:pred|bf16|[fsuc]\d+|f8\w*|token)\[([\d,]*)\]")
_COMMENT = re.compile(r"/\*.*?\*/")
_INDEX = re.compile(r"\(?[su]\d+\[")          # integer values: index tables, not array data
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\([^=]*?\)|\S+)\s+([a-z][\w\-]*)\((.*)$")


def _elements(shape: str) -> int:
    """Elements of a shape text; a tuple counts all its arrays (one logical tile, e.g. all-to-all)."""
    return sum(math.prod(int(x) for x in m.group(1).split(",") if x) for m in _ARRAY.finditer(shape))


def _split_args(rest: str) -> tuple[str, str]:
    """``rest`` starts after the opcode's ``(``: return (operand text, attribute text)."""
    depth = 1
    for k, ch in enumerate(rest):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return rest[:k], rest[k + 1:]
    return rest, ""


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _iota(dims: Sequence[int], reshape: Sequence[int] | None, perm: Sequence[int] | None) -> np.ndarray:
    """XLA's iota tile assignment ``[dims]<=[reshape]T(perm)``."""
    n = math.prod(dims)
    a = np.arange(n).reshape(tuple(reshape) if reshape else (n,))
    if perm:
        a = a.transpose(tuple(perm))
    return a.reshape(tuple(dims))


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the bracket group opening at ``text[start]``."""
    depth = 0
    for k in range(start, len(text)):
        depth += (text[k] == open_) - (text[k] == close)
        if depth == 0:
            return k + 1
    raise MeshplanError(f"unbalanced {open_}{close} in HLO attribute {text[start:start + 80]!r}")


def _mesh_groups(text: str) -> list[list[int]]:
    """``mesh['a'=2,'b'=4], device_ids=(…) {'b':(2)2, …}`` → device groups (XLA's MeshAxesReplicaGroupList)."""
    m = re.match(r"mesh\[([^\]]*)\]", text)
    names, sizes = [], []
    for part in m.group(1).split(","):
        k, v = part.split("=")
        names.append(k.strip().strip("'\"")); sizes.append(int(v))
    rest = text[m.end():]
    ids = np.arange(math.prod(sizes))
    dm = re.match(r"\s*,\s*device_ids=", rest)
    if dm:
        body_start = dm.end()
        if rest[body_start] == "(":
            end = _balanced(rest, body_start, "(", ")")
            body = rest[body_start + 1:end - 1]
        else:
            end = _balanced(rest, body_start, "[", "]")
            body = rest[body_start:end]
        im = re.fullmatch(r"\s*\[([\d,]+)\](?:T\(([\d,]+)\))?\s*", body)
        if im:
            shape = _ints(im.group(1))
            ids = _iota(shape, shape, _ints(im.group(2)) if im.group(2) else None).ravel()
        else:
            ids = np.array(_ints(body))
        rest = rest[end:]
    am = re.search(r"\{([^}]*)\}", rest)
    refs = []   # (mesh axis index, pre_size, size)
    for part in filter(None, (p.strip() for p in am.group(1).split(","))):
        sm = re.fullmatch(r"'?([^':]+)'?(?::\((\d+)\)(\d+))?", part)
        ax = names.index(sm.group(1))
        refs.append((ax, int(sm.group(2)), int(sm.group(3))) if sm.group(2) else (ax, 1, sizes[ax]))
    # refine every mesh axis into [pre, size, rest]-style pieces (sorted by pre_size), as XLA does
    shape, grouped, offsets = [], {}, []
    for ax, full in enumerate(sizes):
        offsets.append(len(shape))
        mine = sorted((r for r in refs if r[0] == ax), key=lambda r: r[1])
        prod = 1
        for (_, pre, size) in mine:
            if pre != prod:
                shape.append(pre // prod); prod = pre
            grouped[(ax, pre)] = len(shape)
            shape.append(size); prod *= size
        if prod != full or not mine:
            shape.append(full // prod)
    order = [grouped[(ax, pre)] for ax, pre, _ in refs]
    perm = [k for k in range(len(shape)) if k not in order] + order
    per_group = math.prod(size for _, _, size in refs)
    arr = ids.reshape(shape).transpose(perm).reshape(-1, per_group)
    return arr.tolist()


def _replica_groups(attrs: str) -> list[list[int]]:
    k = attrs.find("replica_groups=")
    if k < 0:
        return []
    text = attrs[k + len("replica_groups="):]
    if text.startswith("{"):
        body = text[:_balanced(text, 0, "{", "}")]
        return [_ints(g) for g in re.findall(r"\{([\d,\s]*)\}", body[1:-1])]
    if text.startswith("mesh["):
        return _mesh_groups(text)
    im = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if im:
        dims = _ints(im.group(1))
        return _iota(dims, _ints(im.group(2)), _ints(im.group(3)) if im.group(3) else None).tolist()
    raise MeshplanError(f"cannot read replica_groups={text[:80]!r}")


def read_hlo(text: str) -> HloReport:
    """Read the collectives and the height of a compiled (SPMD-partitioned) HLO module's text.

    Collectives are listed in text order: the entry computation's in execution order, a
    ``dynamic-slice`` inside a fused computation where that computation is printed (before ENTRY).
    """
    colls: list[HloCollective] = []
    sizes: dict[str, int] = {}
    height = inp = out = 0
    entry = False
    pm = re.search(r"\bnum_partitions=(\d+)", text.split("\n", 1)[0])
    partitions = int(pm.group(1)) if pm else 0
    for line in text.splitlines():
        line = _COMMENT.sub("", line)
        if line.startswith("ENTRY"):
            entry = True
            continue
        if line.startswith("}"):
            entry = False
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        name, shape, opcode, rest = m.groups()
        operands, attrs = _split_args(rest)
        elems = _elements(shape)
        sizes[name] = elems
        if entry:
            height = max(height, elems)
            if opcode == "parameter":
                inp += elems
            if line.lstrip().startswith("ROOT"):
                out = elems
        if opcode.endswith("-start"):       # async pairs: count the start, skip the done
            opcode = opcode[:-len("-start")]
        if opcode not in COLLECTIVES or (opcode == "dynamic-slice" and _INDEX.match(shape)):
            continue
        names = re.findall(r"%([\w.\-]+)", operands)
        operand = sum(sizes.get(n, 0) for n in names) if opcode != "dynamic-slice" else sizes.get(names[0], 0)
        if opcode == "collective-permute":
            pm = re.search(r"source_target_pairs=\{(.*?)\}\}", attrs)
            groups = [tuple(_ints(p)) for p in re.findall(r"\{([\d,\s]+)\}", pm.group(1) + "}")] if pm else []
        else:
            groups = _replica_groups(attrs)
            if not groups and partitions:      # replica_groups={}: one group of every partition
                groups = [list(range(partitions))]
        dm = re.search(r"\bdimensions=\{([\d,]*)\}", attrs)
        colls.append(HloCollective(opcode, operand, elems, tuple(tuple(g) for g in groups),
                                   tuple(_ints(dm.group(1))) if dm else ()))
    return HloReport(tuple(colls), height, inp, out, partitions)


# -- compiling with jax ---------------------------------------------------------------------------
def partition_spec(t: DistType) -> list:
    """The PartitionSpec entries of ``t``: ``c{a0,…,ak}n`` → ``[ak, …, a0]``, unpartitioned → ``None``."""
    return [list(reversed(d.axes)) if d.axes else None for d in t.dims]


def jax_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("jax") is not None


_CHILD = r"""
import json, sys
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
out = []
for job in json.load(sys.stdin):
    names, sizes = job["names"], job["sizes"]
    mesh = Mesh(np.array(jax.devices()[:int(np.prod(sizes))]).reshape(sizes), tuple(names))
    spec = lambda s: P(*[tuple(e) if e else None for e in s])
    src, dst = NamedSharding(mesh, spec(job["src"])), NamedSharding(mesh, spec(job["dst"]))
    c = jax.jit(lambda x: x, out_shardings=dst).lower(
        jax.ShapeDtypeStruct(tuple(job["shape"]), jnp.dtype(job["dtype"]), sharding=src)).compile()
    ma = c.memory_analysis()
    out.append({"hlo": c.as_text(), "temp_bytes": getattr(ma, "temp_size_in_bytes", None)})
json.dump(out, sys.stdout)
"""


def compile_reshardings(problems: Iterable[tuple[Mesh, DistType, DistType]], *, dtype: str = "float32",
                        timeout_s: float = 1800.0) -> list[dict]:
    """Compile every ``(mesh, src, dst)`` resharding with jax on fake CPU devices.

    One subprocess per device count.  Returns, in order, ``{"hlo": text, "temp_bytes": …}``.
    Raises :class:`MeshplanError` if jax is not installed or a compilation fails.
    """
    problems = list(problems)
    if not jax_available():
        raise MeshplanError("real-XLA comparison needs jax; install it with pip install 'jax[cpu]'")
    by_n: dict[int, list[int]] = {}
    for k, (mesh, _, _) in enumerate(problems):
        by_n.setdefault(mesh.num_devices, []).append(k)
    results: list[dict | None] = [None] * len(problems)
    for n, idx in sorted(by_n.items()):
        jobs = [{"names": list(problems[k][0].names), "sizes": list(problems[k][0].sizes),
                 "shape": list(problems[k][1].globaltype), "dtype": dtype,
                 "src": partition_spec(problems[k][1]), "dst": partition_spec(problems[k][2])} for k in idx]
        env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu",
                   TF_CPP_MIN_LOG_LEVEL="2")
        proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(jobs), env=env,
                              capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode:
            tail = proc.stderr.strip().splitlines()[-3:]
            raise MeshplanError(f"jax failed to compile reshardings on {n} devices: {' | '.join(tail)}")
        for k, res in zip(idx, json.loads(proc.stdout)):
            results[k] = res
    return results  # type: ignore[return-value]


def xla_reports(problems: Iterable[tuple[Mesh, DistType, DistType]], **kw) -> list[HloReport]:
    """:func:`compile_reshardings` then :func:`read_hlo` for every problem."""
    return [read_hlo(r["hlo"]) for r in compile_reshardings(problems, **kw)]
