"""Hierarchical systems: named levels, cardinalities and interconnects (P2 §2, §4 Figure 9, §5).

A :class:`System` lists its levels outermost first (``node=4,gpu=16``); devices
are numbered row-major over level coordinates, the last level fastest
(DESIGN.md numbering conventions).  Each level carries the interconnects a
message crosses when the coordinates of its two ends first differ at that
level.  An interconnect is

* ``switch`` — a non-blocking switch; every port has the full bandwidth.  By
  default each device has its own port (``share=1``), like an NVSwitch.
* ``nic`` — a shared network interface: one port (``bandwidth`` each way) for
  ``share`` consecutive devices, by default the whole unit at that level (one
  NIC per node).
* ``ring`` — a bidirectional ring over the units of the level inside their
  parent (NVLink ring); each directed link has ``bandwidth``.

Bandwidths are bytes per second in each direction, latencies seconds.  Three
forms are read: the short string ``node=4,gpu=16`` (optionally
``node=4:nic:8GB/s,gpu=16:switch:270GB/s``), JSON and TOML files (docs/formats.md),
and the presets of :mod:`meshplan.models.core.presets`.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Mapping

from meshplan.models.core.errors import ModelError, ParseError
from meshplan.models.core.limits import check_limit
from meshplan.models.core.units import parse_bandwidth

__all__ = ["Interconnect", "CollectiveLink", "Level", "System", "KINDS"]

KINDS = ("switch", "nic", "ring")
#: an interconnect kind (one of :data:`KINDS`; resource model in docs/simulator.md)
LinkKind = Literal["switch", "nic", "ring"]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


@dataclass(frozen=True, slots=True)
class Interconnect:
    """One interconnect crossed by messages whose ends first differ at its level."""

    kind: LinkKind
    bandwidth: float
    latency: float = 5e-6
    share: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ModelError(f"unknown interconnect kind {self.kind!r}; use one of {', '.join(KINDS)}")
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise ModelError(f"interconnect bandwidth must be a positive number of bytes/s, got {self.bandwidth!r}")
        if not (isinstance(self.latency, (int, float)) and self.latency >= 0):
            raise ModelError(f"interconnect latency must be >= 0 seconds, got {self.latency!r}")
        if self.share is not None and (not isinstance(self.share, int) or self.share < 1):
            raise ModelError(f"interconnect share must be a positive device count, got {self.share!r}")
        if self.kind == "ring" and self.share is not None:
            raise ModelError("a ring has no `share`: its links join the units of its level")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of docs/formats.md (``share`` and ``name`` only when set)."""
        d: dict[str, Any] = {"kind": self.kind, "bandwidth": self.bandwidth, "latency": self.latency}
        if self.share is not None:
            d["share"] = self.share
        if self.name:
            d["name"] = self.name
        return d


@dataclass(frozen=True, slots=True)
class CollectiveLink:
    """What a level's interconnects deliver to one collective, as measured (``meshplan calibrate``): the
    bandwidth and latency that make the simulator reproduce that collective's measured times over groups
    varying this level (docs/simulator.md, "Measured collectives")."""

    collective: str
    bandwidth: float
    latency: float

    def __post_init__(self) -> None:
        from meshplan.models.core.collectives import Collective

        object.__setattr__(self, "collective", Collective.parse(self.collective).value)
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise ModelError(f"{self.collective} bandwidth must be a positive number of bytes/s, got {self.bandwidth!r}")
        if not (isinstance(self.latency, (int, float)) and self.latency >= 0 and math.isfinite(self.latency)):
            raise ModelError(f"{self.collective} latency must be >= 0 seconds, got {self.latency!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth": self.bandwidth, "latency": self.latency}


@dataclass(frozen=True, slots=True)
class Level:
    """A hardware level: its name, how many units each parent has, its interconnects, and (optionally) what
    they measured for each collective."""

    name: str
    size: int
    links: tuple[Interconnect, ...] = ()
    collectives: tuple[CollectiveLink, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name) or self.name == "root":
            raise ModelError(f"bad level name {self.name!r}: use letters, digits, _ or - (and not 'root')")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1:
            raise ModelError(f"level {self.name!r} must have a positive integer size, got {self.size!r}")
        object.__setattr__(self, "collectives", tuple(self.collectives))
        names = [c.collective for c in self.collectives]
        if len(set(names)) != len(names):
            raise ModelError(f"level {self.name!r} lists a collective twice: {names}")


@dataclass(frozen=True, slots=True)
class System:
    """A hierarchical machine: levels outermost first (P2 §2 "a system")."""

    levels: tuple[Level, ...]
    name: str = ""
    description: str = field(default="", compare=False)
    #: measured f64 matrix-multiply rate of one device while all compute (flop/s; ``meshplan calibrate``),
    #: the γ of the time models of matmul and factorization; None when not measured
    flop_rate: float | None = None
    #: measured seconds one synchronisation of busy ranks costs, per rank count: ``((ranks, seconds), …)``
    #: (``meshplan calibrate``: an 8-byte exchange between ranks that compute between exchanges, beyond the
    #: computing alone — on a host with more ranks than cores, about a scheduler timeslice); the per-message
    #: latency of the factorization time model; empty when not measured
    sync_latency: tuple[tuple[int, float], ...] = ()
    #: measured half-performance inner dimension of a matrix multiply (``meshplan calibrate``): a gemm of inner
    #: dimension ``k`` runs at ``flop_rate·k/(k + gemm_half_k)`` (the rank-``v`` trailing updates of a
    #: factorization); None when not measured, which the time models read as 0 (every gemm at ``flop_rate``)
    gemm_half_k: float | None = None
    #: level sizes, outermost first (derived from ``levels``; cached because routing asks often)
    sizes: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(self.levels))
        if not all(isinstance(lv, Level) for lv in self.levels):
            raise ModelError("a system's levels must be Level values")
        object.__setattr__(self, "sizes", tuple(lv.size for lv in self.levels))
        if not _finite(self.flop_rate, zero=False):
            raise ModelError(f"flop_rate must be a positive number of flop/s, got {self.flop_rate!r}")
        object.__setattr__(self, "sync_latency", _sync_pairs(self.sync_latency))
        if not _finite(self.gemm_half_k, zero=True):
            raise ModelError(f"gemm_half_k must be a finite number >= 0 (an inner dimension), got {self.gemm_half_k!r}")
        if not self.levels:
            raise ModelError("a system needs at least one level, e.g. node=4,gpu=8")
        names = [lv.name for lv in self.levels]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ModelError(f"level names must be unique, repeated: {', '.join(sorted(dup))}")
        for j, lv in enumerate(self.levels):
            for link in lv.links:
                if link.share is not None and link.share > self.unit_size(j):
                    raise ModelError(f"interconnect of level {lv.name!r} is shared by {link.share} devices, "
                                     f"but a {lv.name} holds only {self.unit_size(j)}")

    # -- shape ---------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        """Level names, outermost first."""
        return tuple(lv.name for lv in self.levels)

    @property
    def num_devices(self) -> int:
        """The number of devices: the product of the level sizes."""
        return math.prod(self.sizes)

    def level_index(self, name: str) -> int:
        """Index of the level called ``name`` (0 = outermost); raises :class:`ModelError` when unknown."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ModelError(f"unknown level {name!r}; this system has {', '.join(self.names)}") from None

    def unit_size(self, j: int) -> int:
        """Devices inside one unit of level ``j`` (1 for the last level)."""
        return math.prod(self.sizes[j + 1:])

    def coords(self, device: int) -> tuple[int, ...]:
        """Level coordinates of a device (row-major, last level fastest)."""
        if not 0 <= device < self.num_devices:
            raise ModelError(f"device {device} out of range 0..{self.num_devices - 1}")
        return _coords_table(self.sizes)[device]

    def device(self, coords: tuple[int, ...]) -> int:
        """The device number of level coordinates ``coords`` (row-major, the last level fastest)."""
        d = 0
        for c, size in zip(coords, self.sizes, strict=True):
            d = d * size + c
        return d

    def first_difference(self, a: int, b: int) -> int | None:
        """The outermost level at which devices ``a`` and ``b`` differ (None when equal)."""
        for j, (x, y) in enumerate(zip(self.coords(a), self.coords(b))):
            if x != y:
                return j
        return None

    # -- text forms ----------------------------------------------------------------------
    def short(self) -> str:
        """The short form ``node=4,gpu=8``."""
        return ",".join(f"{lv.name}={lv.size}" for lv in self.levels)

    def __str__(self) -> str:
        return self.name or self.short()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of docs/formats.md; :meth:`from_dict` reads it back."""
        d: dict[str, Any] = {}
        if self.name:
            d["name"] = self.name
        if self.description:
            d["description"] = self.description
        d["levels"] = [{"name": lv.name, "size": lv.size, "links": [ln.to_dict() for ln in lv.links]}
                       | ({"collectives": {c.collective: c.to_dict() for c in lv.collectives}} if lv.collectives else {})
                       for lv in self.levels]
        if self.flop_rate is not None:
            d["flop_rate"] = self.flop_rate
        if self.sync_latency:
            d["sync_latency"] = {str(k): t for k, t in self.sync_latency}
        if self.gemm_half_k is not None:
            d["gemm_half_k"] = self.gemm_half_k
        return d

    def sync_latency_at(self, ranks: int) -> float | None:
        """The measured synchronisation latency at ``ranks`` ranks: that count's, else the largest measured count
        below it, else the smallest above (None when none was measured)."""
        if not self.sync_latency:
            return None
        below = [t for k, t in self.sync_latency if k <= ranks]
        return below[-1] if below else self.sync_latency[0][1]

    def for_collective(self, collective: str) -> "System":
        """The system as one collective sees it: every level that has a measured
        :class:`CollectiveLink` for ``collective`` gets that bandwidth and latency on all its
        interconnects (kinds and sharing unchanged); the system itself when no level has one."""
        return _for_collective(self, str(collective))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "system") -> "System":
        """A system from its JSON form (docs/formats.md); raises :class:`ModelError` naming ``source``."""
        if not isinstance(data, Mapping) or "levels" not in data:
            raise ModelError(f"{source}: a system needs a `levels` list (see docs/formats.md)")
        levels = data["levels"]
        if not isinstance(levels, list) or not levels:
            raise ModelError(f"{source}: `levels` must be a non-empty list")
        check_limit("levels", len(levels), source)
        out = []
        for i, lv in enumerate(levels):
            if not isinstance(lv, Mapping) or "name" not in lv or "size" not in lv:
                raise ModelError(f"{source}: level {i} needs `name` and `size`")
            unknown = set(lv) - {"name", "size", "links", "collectives"}
            if unknown:
                raise ModelError(f"{source}: level {lv['name']!r} has unknown keys {sorted(unknown)}")
            links = []
            for ln in lv.get("links", []) or []:
                if not isinstance(ln, Mapping):
                    raise ModelError(f"{source}: links of level {lv['name']!r} must be tables/objects")
                bad = set(ln) - {"kind", "bandwidth", "latency", "share", "name"}
                if bad or "kind" not in ln or "bandwidth" not in ln:
                    raise ModelError(f"{source}: a link of level {lv['name']!r} needs `kind` and `bandwidth`"
                                     + (f" (unknown keys {sorted(bad)})" if bad else ""))
                bw = parse_bandwidth(ln["bandwidth"])
                links.append(Interconnect(kind=ln["kind"], bandwidth=bw, latency=float(ln.get("latency", 5e-6)),
                                          share=ln.get("share"), name=str(ln.get("name", ""))))
            colls = lv.get("collectives") or {}
            if not isinstance(colls, Mapping) or not all(isinstance(v, Mapping) and {"bandwidth", "latency"} <= set(v)
                                                         for v in colls.values()):
                raise ModelError(f"{source}: `collectives` of level {lv['name']!r} must map a collective to "
                                 "{bandwidth, latency}")
            measured = tuple(CollectiveLink(name, parse_bandwidth(v["bandwidth"]), float(v["latency"]))
                             for name, v in colls.items())
            out.append(Level(name=lv["name"], size=lv["size"], links=tuple(links), collectives=measured))
        rate, sync, half = data.get("flop_rate"), data.get("sync_latency") or {}, data.get("gemm_half_k")
        if not isinstance(sync, Mapping):
            raise ModelError(f"{source}: `sync_latency` must map a rank count to seconds, e.g. {{\"4\": 0.002}}")
        try:
            pairs = tuple((int(k), float(t)) for k, t in sync.items())
        except (TypeError, ValueError) as err:
            raise ModelError(f"{source}: `sync_latency` must map a rank count to seconds ({err})") from err
        return cls(levels=tuple(out), name=str(data.get("name", "")), description=str(data.get("description", "")),
                   flop_rate=None if rate is None else float(rate), sync_latency=pairs,
                   gemm_half_k=half)

    @classmethod
    def parse(cls, text: str) -> "System":
        """A preset name, a JSON/TOML file path, or the short form ``node=4,gpu=16``."""
        from meshplan.models.core.presets import PRESETS, preset

        text = text.strip()
        if text in PRESETS:
            return preset(text)
        path = Path(text)
        if path.suffix.lower() in (".json", ".toml") or os.path.isfile(text):  # isfile: False for a name too long
            return cls.load(path)
        if "=" in text:
            return cls.from_short(text)
        raise ModelError(f"unknown system {text!r}: give a preset ({', '.join(PRESETS)}), "
                         "a .json/.toml file, or levels like node=4,gpu=8")

    @classmethod
    def load(cls, path: str | Path) -> "System":
        """A system from a JSON file (docs/formats.md); raises :class:`ModelError` when missing or malformed."""
        from meshplan.models.core.files import loads, read_text

        path = Path(path)
        raw = read_text(path, what="system file")
        if path.suffix.lower() == ".toml":
            import tomllib

            try:
                data = tomllib.loads(raw)
            except tomllib.TOMLDecodeError as err:
                raise ParseError(f"malformed TOML: {err}", source=str(path)) from err
        else:
            data = loads(raw, source=str(path))
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_short(cls, text: str) -> "System":
        """``node=4,gpu=16`` with default interconnects, or with ``:kind:bandwidth`` per level."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise ParseError("empty system; write levels like node=4,gpu=8")
        check_limit("levels", len(parts), "the system")
        levels = []
        for i, part in enumerate(parts):
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_\-]*)=(\d+)(?::(\w+)(?::([0-9.]+\s*[A-Za-z/]*))?)?", part)
            if not m:
                raise ParseError(f"bad level {part!r}; write name=size, e.g. gpu=8 or gpu=8:ring:135GB/s",
                                 column=text.find(part) + 1)
            name, size, kind, bw = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            default = _default_link(i, len(parts))
            if kind is None:
                link = default
            else:
                link = Interconnect(kind=kind, bandwidth=parse_bandwidth(bw) if bw else default.bandwidth,
                                    latency=default.latency)
            levels.append(Level(name=name, size=size, links=(link,)))
        return cls(levels=tuple(levels))


def _finite(x: Any, *, zero: bool) -> bool:
    """Whether an optional measured rate ``x`` is absent (None) or a finite number > 0 (``zero``: ≥ 0)."""
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and
                         (0 <= x if zero else 0 < x) and x < math.inf)


def _sync_pairs(pairs) -> tuple[tuple[int, float], ...]:
    """``System.sync_latency`` checked and sorted by rank count."""
    out = {}
    for item in pairs:
        k, t = item
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ModelError(f"sync_latency: a rank count must be a whole number >= 1, got {k!r}")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < math.inf:
            raise ModelError(f"sync_latency: seconds must be a finite number >= 0, got {t!r}")
        out[k] = float(t)
    return tuple(sorted(out.items()))


@lru_cache(maxsize=64)
def _for_collective(system: System, collective: str) -> System:
    from dataclasses import replace

    from meshplan.models.core.collectives import Collective

    name = Collective.parse(collective).value
    if not any(lv.collectives for lv in system.levels):
        return system
    levels = []
    for lv in system.levels:
        m = next((c for c in lv.collectives if c.collective == name), None)
        links = lv.links if m is None else tuple(replace(ln, bandwidth=m.bandwidth, latency=m.latency)
                                                  for ln in lv.links)
        levels.append(Level(lv.name, lv.size, links))
    return replace(system, levels=tuple(levels))  # name, description, flop rate and sync latency kept


@lru_cache(maxsize=64)
def _coords_table(sizes: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(itertools.product(*(range(x) for x in sizes)))


def _default_link(i: int, n: int) -> Interconnect:
    """Interconnects of the short form when none are given (docs/formats.md)."""
    if i == n - 1:
        return Interconnect("switch", 135e9, 2e-6, name="intra")  # NVLink-class, per device
    if i == 0:
        return Interconnect("nic", 8e9, 10e-6, name="nic")  # 100 Gb/s NIC at 60 %, per unit
    return Interconnect("nic", 32e9, 5e-6, name="pcie")  # PCIe/UPI-class, per unit
