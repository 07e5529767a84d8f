"""Process groups for meshplan's steps, built once and cached (every rank creates them in the same order)."""

from __future__ import annotations

import torch.distributed as dist

__all__ = ["process_group"]

_CACHE: dict[tuple, object] = {}


def process_group(ranks: tuple[int, ...]):
    """The process group of the global ``ranks`` (sorted; a group's ranks are numbered in increasing global
    rank), made with ``dist.new_group`` the first time.  Every rank of the default group must ask for the
    same groups in the same order (``new_group`` is collective)."""
    key = (id(dist.group.WORLD), tuple(sorted(ranks)))
    pg = _CACHE.get(key)
    if pg is None:
        if len(key[1]) == dist.get_world_size() and list(key[1]) == list(range(dist.get_world_size())):
            pg = dist.group.WORLD
        else:
            pg = dist.new_group(list(key[1]))
        _CACHE[key] = pg
    return pg
