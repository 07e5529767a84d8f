"""Process groups for meshplan's steps, built once and cached (every rank creates them in the same order), and
the one place that lets go of them.

Every cache of :mod:`meshplan.torch` that holds process groups (the groups here, the compiled programs of
``redistribute`` and ``all_reduce``, the plans keyed by a ``DeviceMesh``) is made by :func:`world_cache` and
belongs to one default process group: it is emptied when ``dist.group.WORLD`` is no longer the object it was
built under (``destroy_process_group`` then ``init_process_group`` again; comparing the object, not its
``id``, which a new group may reuse), and by :func:`release`, which also runs at interpreter exit.  Dropping
the groups at exit, before the interpreter is torn down, matters: a gloo group destroyed during finalization
ends worker threads that may still hold tensors, and a thread that then asks for the GIL is ended by Python
inside a C++ destructor, which aborts the process ("terminate called without an active exception")."""

from __future__ import annotations

import atexit
import gc
from typing import Callable

import torch.distributed as dist

__all__ = ["process_group", "world_cache", "on_release", "release"]

_WORLD: list = [None]   # the default group the caches were built under
_HOOKS: list[Callable[[], None]] = []


def world_cache() -> dict:
    """A new dict that is emptied with the other caches of meshplan.torch (see the module docstring).  Call
    :func:`current` before reading it."""
    d: dict = {}
    _HOOKS.append(d.clear)
    return d


def on_release(hook: Callable[[], None]) -> None:
    """Run ``hook`` (e.g. an ``lru_cache``'s ``cache_clear``) whenever the caches are emptied."""
    _HOOKS.append(hook)


def release() -> None:
    """Drop every process group, compiled program and plan meshplan.torch holds, and collect them now (the
    groups' threads end here, while the interpreter is alive).  Runs at exit; a program may call it before
    ``dist.destroy_process_group()``."""
    for hook in _HOOKS:
        hook()
    _WORLD[0] = None
    gc.collect()


def current() -> None:
    """Empty the caches if the default process group is not the one they were built under."""
    world = dist.group.WORLD
    if world is not _WORLD[0]:
        release()
        _WORLD[0] = world


_CACHE = world_cache()
atexit.register(release)


def process_group(ranks: tuple[int, ...]):
    """The process group of the global ``ranks`` (sorted; a group's ranks are numbered in increasing global
    rank), made with ``dist.new_group`` the first time.  Every rank of the default group must ask for the
    same groups in the same order (``new_group`` is collective)."""
    current()
    key = tuple(sorted(ranks))
    pg = _CACHE.get(key)
    if pg is None:
        if list(key) == list(range(dist.get_world_size())):
            pg = dist.group.WORLD
        else:
            pg = dist.new_group(list(key))
        _CACHE[key] = pg
    return pg
