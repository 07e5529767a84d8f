"""meshplan.models.reduction — P2's reduction programs and their semantics.

* :mod:`.state` — state matrices (Figure 7) as bit masks, initial and goal states (§3.5)
* :mod:`.semantics` — the Hoare rules of Figure 8 as pure functions
* :mod:`.hierarchy` — synthesis hierarchies (a)–(d) of §3.4 and their coordinates
* :mod:`.dsl` — the reduction language (§3.3): slice, form, collective; Table 2 groups
* :mod:`.lowering` — programs lowered to device groups of the whole system
* :mod:`.checker` — replay of a lowered program, the solver-free re-check
"""
