"""Which statement instances lie on a path to an output of the CDAG, from the program's trace at sample
sizes (the backward pass of :func:`meshplan.models.soap.dead.last_iterations`): an optimal red–blue
pebbling never computes the others (Kwasniewski's thesis, sections 3.2 and 5.2)."""

from __future__ import annotations

from meshplan.models.loops.program import Program, Statement


def partial_reads(st: Statement, mine, written: set) -> list[tuple[str, str]]:
    """``(statement, input array)`` for each input array of which the statement's remaining instances read,
    at some sample, more elements than its live instances do: an element only a dead instance reads need
    not be loaded (``C[i] += A[i]`` over ``range(0, M)`` whose ``C[1]`` is overwritten before any read),
    so the trivial floor counts none of that access (a count of the rest would be piecewise)."""
    import numpy as np

    out = []
    for i, acc in enumerate(st.reads):       # the trace's access columns
        if acc.array in written or (st.name, acc.array) in out:
            continue
        for values, tr, live, at in mine:
            inside = at.copy()
            for lp in st.loops:
                v = tr.vars[lp.var]
                inside &= (v >= at_instances(lp.lower, tr, values)) & (v < at_instances(lp.upper, tr, values))
            if np.unique(tr.elems[live & at, i]).size < np.unique(tr.elems[inside, i]).size:
                out.append((st.name, acc.array))
                break
    return out


def at_instances(expr, tr, values) -> "np.ndarray":
    """``expr`` (a loop bound) at every instance of trace ``tr`` taken at sizes ``values``."""
    from meshplan.models.soap.replay import at_points

    return at_points(expr, {**tr.vars, **values}, tr.instances)


def margin(lp, end, mine, sign: int) -> int:
    """How many iterations of loop ``lp`` from its bound ``end`` (``sign`` 1: the lower one, −1: the last)
    hold no live instance of the statement at every sample (``mine`` as in :func:`last_iterations`): the
    same constant at each sample where the statement has a live instance, else 0 (a margin that grows with
    the sizes is no constant cut)."""
    seen, removes = set(), False
    for values, tr, live, at in mine:
        sel = live & at
        if sel.any():
            off = sign * (tr.vars[lp.var] - at_instances(end, tr, values))
            seen.add(int(off[sel].min()))
            removes |= bool((at & (off < min(seen))).any())
    return seen.pop() if len(seen) == 1 and min(seen) > 0 and removes else 0


def dead_at(program: Program, sizes: dict[str, int]) -> set[str]:
    """The statements of ``program`` with instances at ``sizes`` but none on a path to an output there
    (empty when the trace is too large).  A statement that only an empty loop reads is one (``B += C[i]``
    read by ``C[j] += B`` over ``range(i + 1, M)``, and overwritten by ``B = 1.0``, at M = 1): at those
    sizes its vertices, and the inputs they read, count nothing."""
    got = live_instances(program, [sizes])
    if got is None:
        return set()
    (_, tr, live), = got
    return {st.name for k, st in enumerate(program.statements)
            if (tr.stmt == k).any() and not (live & (tr.stmt == k)).any()}


def live_instances(program: Program, samples: list | None = None) -> list | None:
    """``[(sizes, trace, live)]`` at each sample: every size parameter equal to one of the temporaries'
    sample sizes, and (with two parameters or more) the two smallest of them alternating over the parameters
    both ways, so that sizes which differ are sampled too; ``live[n]`` whether instance ``n`` lies on a path
    to an output (an element's last value) of the CDAG.  None when a trace is too large or cannot be built."""
    import numpy as np

    from meshplan.models.core.errors import ModelError
    from meshplan.models.soap.expand import SAMPLE_SIZES
    from meshplan.models.soap.replay import build_trace, loop_order, producers, stream

    if samples is None:
        samples = [{p: size for p in program.params} for size in SAMPLE_SIZES]
    if len(program.params) > 1 and len(samples) == len(SAMPLE_SIZES):
        lo, hi = sorted(SAMPLE_SIZES)[:2]
        samples += [{p: (lo, hi)[(k + flip) % 2] for k, p in enumerate(program.params)} for flip in (0, 1)]
    out = []
    for values in samples:
        try:
            tr = build_trace(program, values, limit=200_000)
        except ModelError:
            return None
        live = np.zeros(tr.instances, dtype=bool)
        el, wr, inst = stream(tr, loop_order(tr))
        if el.size:
            prod, final = producers(el, wr, inst)
            live[final[final >= 0]] = True
            read = ~wr & (prod >= 0)
            src, dst = prod[read], inst[read]
            for k in np.argsort(-dst, kind="stable").tolist():    # readers before their producers
                if live[dst[k]]:
                    live[src[k]] = True
        out.append((values, tr, live))
    return out
