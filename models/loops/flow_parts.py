"""Small pieces of the counting frontend (:mod:`meshplan.models.loops.flow_frontend`): ``# count:`` markers,
the names a node reads, a loop body's early exit, which names are iteration variables, the process grid, and ``min``/``max``
bounds as sympy builds them (thesis section 2.2)."""

from __future__ import annotations

import ast
import io
import tokenize

import sympy as sp

from meshplan.models.loops.frontend import _children
from meshplan.models.loops.program import sym

__all__: list[str] = []


def _markers(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    if "count:" not in text:  # no marker can be there: skip the tokenizer
        return out
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                body = tok.string.lstrip("#").strip()
                if body.startswith("count:"):
                    name = body[len("count:"):].strip()
                    if name.isidentifier():
                        out[tok.start[0]] = name
    except (tokenize.TokenError, IndentationError):
        pass  # ast.parse reports the syntax error
    return out


def _walk(node) -> list:
    """``list(ast.walk(node))``: ``node`` and every node under it, breadth-first, in the same order."""
    out = [node]
    for n in out:  # the list grows while it is read
        out.extend(_children(n))
    return out


def _names(node) -> set[str]:
    return {n.id for n in _walk(node) if isinstance(n, ast.Name)} if node is not None else set()


#: the nodes that may hold statements (expressions never do)
_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _early_exit(body) -> str | None:
    """``break``/``continue``/``return`` that leaves this loop (not one of its nested loops); the statements are
    searched depth first, last first, without entering expressions (they hold no statements)."""
    todo = list(body)
    while todo:
        nd = todo.pop()
        if isinstance(nd, (ast.Break, ast.Continue, ast.Return)):
            return type(nd).__name__.lower()
        if isinstance(nd, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            continue
        todo.extend(c for c in _children(nd) if isinstance(c, _HOLDS_STATEMENTS))
    return None


def _linear(e: sp.Expr) -> bool:
    """``e`` is ``c0 + c1*x1 + …`` with rational ``c`` and integer symbols of :func:`sym` (no sign known)."""
    for t in (e.args if e.is_Add else (e,)):
        if t.is_Mul and len(t.args) == 2 and t.args[0].is_Rational:
            t = t.args[1]
        if not (t.is_Rational or (t.is_Symbol and sym(t.name) is t)):
            return False
    return True


def _min_max(which: str, args: list[sp.Expr]) -> sp.Expr:
    """``min(…)``/``max(…)`` as sympy's ``Min``/``Max``, the same expression sympy evaluates, built without
    its search for redundant arguments where none can be found: affine arguments, no two of which differ by a
    constant, over integer symbols whose signs are unknown (no difference has a sign sympy can decide); other
    arguments go through sympy's evaluation."""
    cls = sp.Min if which == "min" else sp.Max
    if len(set(args)) == len(args) and all(_linear(a) for a in args):
        parts = []
        for a in args:
            c, rest = a.as_coeff_Add()
            parts.append(rest)
        if len(set(parts)) == len(parts):
            return cls(*args, evaluate=False)
    return cls(*args)


def _iteration_vars(nodes) -> set[str]:
    """The iteration variables: names that steer control flow (read by a loop guard, a ``range``, or the update of
    another iteration variable) and are assigned integers, not data; ``nodes``: every node of the function
    (:func:`_walk`)."""
    assigned: dict[str, set[str]] = {}
    control: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.While, ast.If)):
            control |= _names(node.test)
        elif isinstance(node, ast.For):
            control |= _names(node.iter) | _names(node.target)
            if isinstance(node.target, ast.Name):
                assigned.setdefault(node.target.id, set())
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for nm in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", [])):
                    if isinstance(nm, ast.Name):
                        assigned.setdefault(nm.id, set()).update(_names(node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigned.setdefault(node.target.id, set()).update(_names(node.value) | {node.target.id})
    itv = control & set(assigned) - _data_valued(nodes)
    changed = True
    while changed:
        changed = False
        for v in list(itv):
            new = (assigned[v] & set(assigned)) - itv
            if new:
                itv |= new
                changed = True
    return itv


def _data_valued(nodes) -> set[str]:
    """Names assigned from data (calls, array elements, attributes, non-integer constants); ``nodes`` as for
    :func:`_iteration_vars`."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
            bad = any(isinstance(x, (ast.Subscript, ast.Attribute)) or (isinstance(x, ast.Constant)
                      and not isinstance(x.value, int)) or (isinstance(x, ast.Call) and not (
                      isinstance(x.func, ast.Name) and x.func.id in ("min", "max")))
                      for x in _walk(node.value))
            if bad:
                out |= {t.id for t in tgts if isinstance(t, ast.Name)}
    return out


def _grid(fn, itvars: set, err) -> tuple[tuple[str, str], ...]:
    """The (rank variable, process count) pairs declared by top-level ``assert 0 <= r < p`` statements (the
    process grid); ``err(node, message)`` makes the reader's error."""
    out: list[tuple[str, str]] = []
    for node in fn.body:
        if not isinstance(node, ast.Assert):
            continue
        parts = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) \
            else [node.test]
        for t in parts:
            ok = (isinstance(t, ast.Compare) and len(t.ops) == 2 and isinstance(t.ops[0], ast.LtE)
                  and isinstance(t.ops[1], ast.Lt) and isinstance(t.left, ast.Constant) and t.left.value == 0
                  and all(isinstance(c, ast.Name) for c in t.comparators))
            if not ok:
                raise err(node, f"`assert {ast.unparse(node.test)}` does not declare a process grid: write "
                          "`assert 0 <= r < p and 0 <= s < q` (one rank variable and its process "
                          "count per grid dimension)")
            r, q = (c.id for c in t.comparators)
            if r in itvars or q in itvars or r == q:
                raise err(node, f"`{ast.unparse(t)}`: the rank variable and the process count must be two "
                          "different names that no loop assigns")
            if any(r in pair or q in pair for pair in out):
                raise err(node, f"`{ast.unparse(t)}`: each grid dimension needs its own rank variable and "
                          "process count")
            out.append((r, q))
    return tuple(out)
