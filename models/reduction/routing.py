"""Routing the flows of a simulated step over a system's interconnects, as arrays (P2 §5; docs/simulator.md).

A flow ``(src, dst, bytes)`` crosses the level where its two ends first differ; on each interconnect of
that level it loads

* a ``switch``/``nic`` link: the sender's *up* port and the receiver's *down* port (one port per
  ``port_share`` devices: per device for a switch, per unit — one NIC per node — for a NIC);
* a ``ring`` link: every ring segment on the shorter way round, in its direction.

A step's bandwidth time is the largest load (bytes / bandwidth) over all ports and segments.  The
:class:`Router` does this for all flows of a step at once with numpy (``np.bincount`` sums each resource's
loads in flow order, as a loop over the flows would), so a step over thousands of devices costs
milliseconds.  Each flow's latency is the largest latency among the links of the level it crosses.
"""

from __future__ import annotations

import math

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.core.system import System

__all__ = ["Router", "port_share"]


def port_share(system: System, level: int, link) -> int:
    """Devices per port of a switch/NIC interconnect (docs/simulator.md)."""
    if link.share is not None:
        return link.share
    return 1 if link.kind == "switch" else system.unit_size(level)


class Router:
    """Routes flow arrays on one system (coordinates computed once)."""

    def __init__(self, system: System) -> None:
        self.system = system
        sizes = tuple(lv.size for lv in system.levels)
        self.n = math.prod(sizes)
        self.coords = np.stack(np.unravel_index(np.arange(self.n), sizes), axis=1) if sizes else np.zeros((1, 0), int)
        self.host = self.coords[:, 0] if len(sizes) >= 2 else np.zeros(self.n, dtype=np.intp)
        self.level_latency = [max((ln.latency for ln in lv.links), default=0.0) for lv in system.levels]

    def levels_of(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The level each flow crosses (−1 for a flow from a device to itself)."""
        diff = self.coords[src] != self.coords[dst]
        return np.where(diff.any(axis=1), diff.argmax(axis=1), -1)

    def loads(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray
              ) -> tuple[float, str, np.ndarray]:
        """``(bandwidth time, bottleneck, per-flow latency)`` of flows ``src → dst`` carrying ``nbytes``."""
        system = self.system
        lev = self.levels_of(src, dst)
        lat = np.zeros(len(src))
        best, where, first = 0.0, "none", len(src) + 1
        flow_ids = np.arange(len(src))
        for j, lv in enumerate(system.levels):
            sel = np.nonzero(lev == j)[0]
            if not len(sel):
                continue
            if not lv.links:
                raise ModelError(f"level {lv.name!r} of system {system} has no interconnect to carry a message")
            lat[sel] = self.level_latency[j]
            for li, link in enumerate(lv.links):
                w = nbytes[sel] / link.bandwidth
                name = link.name or link.kind
                if link.kind == "ring":
                    parts = [(_ring_hops(self, src, dst, sel, j, w), f"{name} ring link of level {lv.name}")]
                else:
                    share = port_share(system, j, link)
                    parts = [((src[sel] // share, w, flow_ids[sel]), f"{name} port (up) at level {lv.name}"),
                             ((dst[sel] // share, w, flow_ids[sel]), f"{name} port (down) at level {lv.name}")]
                for (res, wt, fid), label in parts:
                    if not len(res):
                        continue
                    load = np.bincount(res, weights=wt)
                    top = float(load.max())
                    if top <= 0:
                        continue
                    if top < best * (1 - 1e-12):
                        continue
                    f0 = int(fid[(load >= top * (1 - 1e-12))[res]].min())  # first flow on a busiest resource
                    if top > best * (1 + 1e-12) or f0 < first:
                        best, where, first = top, label, f0
        return best, where, lat


def _ring_hops(router: Router, src: np.ndarray, dst: np.ndarray, sel: np.ndarray, j: int, w: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resource ids (unit × position × direction), weights and flow ids of the ring hops of flows
    ``sel``: the shorter way round (forward on a tie), in flow order."""
    size = router.system.levels[j].size
    a, b = router.coords[src[sel], j], router.coords[dst[sel], j]
    fwd = (b - a) % size
    back = fwd > size - fwd
    step = np.where(back, -1, 1)
    hops = np.where(back, size - fwd, fwd)
    unit = src[sel] // router.system.unit_size(j - 1) if j > 0 else np.zeros(len(sel), dtype=np.intp)
    reps = np.repeat(np.arange(len(sel)), hops)
    offs = np.arange(len(reps)) - np.repeat(np.cumsum(hops) - hops, hops)
    pos = (a[reps] + step[reps] * offs) % size
    res = ((unit[reps] * size + pos) * 2 + back[reps]).astype(np.intp)
    return res, w[reps], sel[reps]
