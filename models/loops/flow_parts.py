"""Small pieces of the counting frontend (:mod:`meshplan.models.loops.flow_frontend`): ``# count:`` markers,
the names a node reads, a loop body's early exit, and ``min``/``max`` bounds as sympy builds them (thesis
section 2.2)."""

from __future__ import annotations

import ast
import io
import tokenize

import sympy as sp

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


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _early_exit(body) -> str | None:
    """``break``/``continue``/``return`` that leaves this loop (not one of its nested loops)."""
    todo = list(body)
    while todo:
        nd = todo.pop()
        if isinstance(nd, (ast.Break, ast.Continue, ast.Return)):
            return type(nd).__name__.lower()
        if isinstance(nd, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(nd))
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
