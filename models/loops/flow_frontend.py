"""Plain Python functions as :class:`~meshplan.models.loops.control.Flow` trees (thesis section 2.2).

The same reader as the SOAP frontend (:mod:`meshplan.models.loops.frontend`: one ``ast`` pass, one
expression reader) with the control flow that iteration counting needs::

    def tree_reduction(n, p, rank):
        for i in range(rank * n // p, min((rank + 1) * n // p, n)):
            s[rank] += a[i]
        i = 1
        while i < p:            # affine guard, multiplicative update
            combine(s)
            i *= 2

* *Iteration variables* are the names that steer control flow: names read by a loop guard, a
  ``range``, or the update of another iteration variable.  Assignments to them are updates
  ``x <- A x + b``; every other statement inside a loop (array updates, calls, data scalars) is one
  unit of work, named ``S1, S2, …`` in source order or by a trailing ``# count: NAME`` marker.
* Parameters are the other names (``n``, ``p``…); ``procs`` (default ``p``) is the process count and
  ``rank`` (default: the first of ``rank``, ``id``, ``tid``, ``pid``, ``me`` that appears) the process
  id of explicitly parallel code.  ``/`` is exact rational division, ``//`` floor division.
* Loops outside the class (data-dependent bounds or guards, ``break``/``return``, iteration over
  something other than ``range``) become :class:`~meshplan.models.loops.control.Opaque` loops with an
  unknown count ``u1, u2, …`` (section 2.5.1); ``if`` on anything but parameters becomes an Opaque
  branch taken ``u_k`` in {0, 1} times.  Each such decision is recorded in ``Flow.notes`` with its line.
"""

from __future__ import annotations

import ast

import sympy as sp

from meshplan.models.core.errors import ParseError
from meshplan.models.loops.control import Assign, Branch, Deferred, Flow, Loop, Opaque, Work
from meshplan.models.loops.forms import add, atom, constant, names, negate_cond, sub
from meshplan.models.loops.flow_forms import cond_form, expr_forms, guard_forms
from meshplan.models.loops.flow_parts import _early_exit, _grid, _iteration_vars, _markers, _min_max, _names, _walk
from meshplan.models.loops.frontend import _Reader, functions
from meshplan.models.loops.program import sym

__all__ = ["parse_flow_source", "parse_flow_file", "RANK_NAMES"]

RANK_NAMES = ("rank", "id", "tid", "pid", "me")
_CMP = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}


def parse_flow_file(path: str, **kw) -> list[Flow]:
    """The flows of the Python file at ``path`` (``kw`` as for :func:`parse_flow_source`); an unreadable
    file is a :class:`ParseError`."""
    from meshplan.models.core.files import read_text

    text = read_text(path, what="Python file")
    return parse_flow_source(text, source=path, **kw)


def parse_flow_source(text: str, *, source: str | None = None, function: str | None = None,
                      procs: str = "p", rank: str | None = None) -> list[Flow]:
    """Every function of ``text`` (or only ``function``) as a :class:`Flow`."""
    markers = _markers(text)
    return [_FlowReader(source, markers, procs, rank).flow(f)
            for f in functions(text, source=source, function=function, whole_module=True)]


def _range(args: list) -> tuple:
    """``range``'s arguments as ``(lo, hi, step)``."""
    one = sp.Integer(1)
    return (sp.Integer(0), args[0], one) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else one)


def _not(cond):
    """``not cond`` of a sympy condition or of a :class:`Deferred` one."""
    if type(cond) is Deferred:
        return Deferred(lambda: sp.Not(cond.get()), negate_cond(cond.forms))
    return sp.Not(cond)


class _Head:
    """A loop's head as the notes print it, ``ast.unparse``d only when a note is written."""

    def __init__(self, form: str, *nodes) -> None:
        self.form, self.nodes = form, nodes

    def __str__(self) -> str:
        return self.form.format(*(ast.unparse(n) for n in self.nodes))


class _Outside(Exception):
    """An expression outside the affine class (becomes an Opaque loop / branch)."""


class _FlowReader(_Reader):
    def __init__(self, source, markers, procs, rank) -> None:
        super().__init__(source)
        self.markers, self.procs, self.rank_name = markers, procs, rank

    def flow(self, fn: ast.FunctionDef) -> Flow:
        self.params = [a.arg for a in fn.args.args]
        self.scalars = set()
        self.size_names = set()
        self.used_vars = {}
        self.notes: list[str] = []
        self.n_work = self.n_unknown = 0
        nodes = _walk(fn)  # one walk of the function, read by the three passes below
        names = [n for n in nodes if isinstance(n, ast.Name)]
        self.itvars = _iteration_vars(nodes)
        self.data = {n.id for n in names if isinstance(n.ctx, ast.Store)}
        self.data -= self.itvars
        grid = _grid(fn, self.itvars, self.err)
        if grid:
            self.rank_name = grid[0][0]
        elif self.rank_name is None:
            used = {n.id for n in names}
            self.rank_name = next((r for r in RANK_NAMES if r in used and r not in self.itvars), None)
        self.grid_ranks = {r for r, _ in grid} or {self.rank_name}
        body = self.block(fn.body, depth=0, loopvars=())
        procs = {q for _, q in grid} or {self.procs}
        params = [p for p in self.params if p in self.size_names or p in procs]
        params += sorted(self.size_names - set(params) - self.grid_ranks)
        params += [q for _, q in grid if q not in params]
        rank = self.rank_name if (grid or self.rank_name in self.size_names) else None
        return Flow(fn.name, tuple(p for p in params if p not in self.grid_ranks), body, rank, tuple(self.notes),
                    self.source, grid)

    # -- statements --------------------------------------------------------------------------
    def block(self, body, depth: int, loopvars: tuple[str, ...]) -> tuple:
        out: list = []
        for node in body:
            if isinstance(node, ast.For):
                out.extend(self.for_loop(node, depth, loopvars))
            elif isinstance(node, ast.While):
                out.append(self.while_loop(node, depth, loopvars))
            elif isinstance(node, ast.If):
                out.extend(self.branch(node, depth, loopvars))
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and self._is_update(node):
                out.append(self.update(node, loopvars))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            elif isinstance(node, (ast.Pass, ast.Import, ast.ImportFrom)):
                continue
            elif isinstance(node, ast.Assert) and depth == 0:
                continue  # the process grid, read by _grid
            elif isinstance(node, ast.Assert):
                raise self.err(node, "`assert` declares the process grid and belongs at the top of the function, "
                                     "outside every loop")
            elif isinstance(node, ast.Return) and depth == 0:
                continue
            elif isinstance(node, (ast.Break, ast.Continue, ast.Return)):
                raise _Outside(f"`{ast.unparse(node).split()[0]}`")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
                if depth > 0:
                    self.n_work += 1
                    name = self.markers.get(node.lineno, f"S{self.n_work}")
                    out.append(Work(name, node.lineno, Deferred(lambda node=node: ast.unparse(node), None)))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                raise self.err(node, f"nested {type(node).__name__} is not supported in a counted function")
            else:
                raise self.err(node, f"unsupported statement {type(node).__name__}: only loops, `if` on "
                                     "parameters, assignments and expression statements are understood")
        return tuple(out)

    def _is_update(self, node) -> bool:
        tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [n for t in tgts for n in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", []))]
        return bool(names) and all(isinstance(n, ast.Name) and n.id in self.itvars for n in names)

    def update(self, node, loopvars) -> Assign:
        if isinstance(node, ast.AugAssign):
            op = _AUG.get(type(node.op))
            if op is None:
                raise self.err(node, f"update with {type(node.op).__name__} is not an affine update")
            target, value = node.target.id, ast.BinOp(node.target, node.op, node.value)
            ast.copy_location(value, node)
            targets, values = (target,), (value,)
        else:
            if len(node.targets) != 1:
                raise self.err(node, "chained assignment `a = b = ...` is not supported")
            t = node.targets[0]
            if isinstance(t, ast.Name):
                targets, values = (t.id,), (node.value,)
            elif isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(t.elts):
                targets, values = tuple(e.id for e in t.elts), tuple(node.value.elts)
            else:
                raise self.err(node, "tuple assignment needs a tuple of as many values")
        for tg in targets:
            if tg in loopvars:
                raise self.err(node, f"assignment to the for-loop variable {tg} inside its loop; use a while loop")
        try:
            fs = expr_forms(self, values)
            exprs = tuple(self.expr(v, {}) for v in values) if fs is None else \
                Deferred(lambda: tuple(self.expr(v, {}) for v in values), fs)
        except _Outside as why:
            raise self.err(node, f"update of {', '.join(targets)} is outside the affine class ({why}); "
                                 "iteration variables must be updated by integer expressions") from None
        return Assign(targets, exprs, node.lineno)

    def _opaque(self, node, construct: str, why: str, body_nodes, depth, loopvars, extra=(), cond=None) -> Opaque:
        self.n_unknown += 1
        u, construct = f"u{self.n_unknown}", str(construct)
        self.notes.append(f"line {node.lineno}: {construct} is outside the affine class ({why}); "
                          f"counted as {u} iterations (section 2.5.1; give bounds with --bounds {u}=LO..HI)")
        try:
            body = self.block(body_nodes, depth + 1, loopvars)
        except _Outside:
            body = ()
        assigned = {n.id for n in _walk(ast.Module(body=list(body_nodes), type_ignores=[]))
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return Opaque(u, body, node.lineno, construct, tuple(sorted((assigned | set(extra)) & self.itvars)), cond)

    def for_loop(self, node: ast.For, depth, loopvars) -> list:
        head = _Head("`for {} in {}`", node.target, node.iter)
        it = node.iter
        var = node.target.id if isinstance(node.target, ast.Name) else None
        if node.orelse:
            raise self.err(node, "`for ... else` is not supported")
        if var in loopvars:
            raise self.err(node, f"loop variable {var} shadows an enclosing loop variable")
        ok = (var is not None and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
              and it.func.id == "range" and 1 <= len(it.args) <= 3 and not it.keywords)
        if not ok:
            return [self._opaque(node, head, "not a `range` loop", node.body, depth, loopvars, (var,) if var else ())]
        try:
            fs = expr_forms(self, it.args)
            init, guard, update, used = self._range_forms(var, fs, it) if fs is not None else \
                self._range_sympy(var, [self.expr(a, {}) for a in it.args])
        except _Outside as why:
            return [self._opaque(node, head, str(why), node.body, depth, loopvars, (var,))]
        exit_ = _early_exit(node.body)
        if exit_:
            return [self._opaque(node, head, f"its body leaves the loop early with `{exit_}`", node.body,
                                 depth, loopvars, (var,))]
        try:
            body = self.block(node.body, depth + 1, loopvars + (var,))
        except _Outside as why:
            return [self._opaque(node, head, f"its body uses {why}", node.body, depth, loopvars, (var,))]
        body = body + (Assign((var,), update, node.lineno),)
        par = any(r is not None and r in used for r in self.grid_ranks)
        return [Assign((var,), init, node.lineno), Loop(guard, body, node.lineno, "for", var, par)]

    @staticmethod
    def _range_sympy(var: str, args: list) -> tuple:
        """``for var in range(*args)`` as ``var = lo``, guard ``hi - var`` (``var - hi`` for a negative step),
        update ``var + step``, and the names the bounds read."""
        lo, hi, step = _range(args)
        if step == 0 or sym(var) in step.free_symbols:
            raise _Outside("step must be a non-zero integer expression")
        guard = sym(var) - hi if step.is_number and step < 0 else hi - sym(var)
        return (lo,), (guard,), (sym(var) + step,), {x.name for x in lo.free_symbols | hi.free_symbols}

    def _range_forms(self, var: str, fs: tuple, it) -> tuple:
        """:meth:`_range_sympy` of ``range`` arguments with the forms ``fs``: the same values as forms, their
        sympy expressions built on first use."""
        one = {"": 1}
        lo, hi, step = ({}, fs[0], one) if len(fs) == 1 else (fs[0], fs[1], fs[2] if len(fs) == 3 else one)
        if not step or var in names(step, set()):
            raise _Outside("step must be a non-zero integer expression")
        c = constant(step)
        guard = sub(atom(var), hi) if c is not None and c < 0 else sub(hi, atom(var))
        memo: list = []

        def part(k: int):
            if not memo:
                memo.append(self._range_sympy(var, [self.expr(a, {}) for a in it.args]))
            return memo[0][k]
        return (Deferred(lambda: part(0), (lo,)), Deferred(lambda: part(1), (guard,)),
                Deferred(lambda: part(2), (add(atom(var), step),)), names(lo, set()) | names(hi, set()))

    def while_loop(self, node: ast.While, depth, loopvars) -> Loop | Opaque:
        head = _Head("`while {}`", node.test)
        if node.orelse:
            raise self.err(node, "`while ... else` is not supported")
        exit_ = _early_exit(node.body)
        if exit_:
            return self._opaque(node, head, f"its body leaves the loop early with `{exit_}`", node.body,
                                depth, loopvars)
        try:
            fs = guard_forms(self, node.test)
            guard = self.guard(node.test) if fs is None else Deferred(lambda: self.guard(node.test), fs)
            body = self.block(node.body, depth + 1, loopvars)
        except _Outside as why:
            return self._opaque(node, head, str(why), node.body, depth, loopvars)
        return Loop(guard, body, node.lineno, "while")

    def branch(self, node: ast.If, depth, loopvars) -> list:
        names = _names(node.test)
        data = names & (self.itvars | self.data) or any(isinstance(n, (ast.Subscript, ast.Call))
                                                            for n in _walk(node.test))
        cond = None
        if not data:
            try:
                cond = self._condition(node.test)
            except _Outside:
                data = True
        if data or (names & self.grid_ranks):
            if cond is None and not (names & self.data) and not any(isinstance(n, (ast.Subscript, ast.Call))
                                                                    for n in _walk(node.test)):
                try:  # a condition on iteration variables and parameters (no data) is kept for the counter
                    cond = self._condition(node.test)
                except _Outside:
                    cond = None
            out = [self._opaque(node, f"`if {ast.unparse(node.test)}`", "the condition is not on parameters only",
                                node.body, depth - 1, loopvars, cond=cond)]
            if node.orelse:
                out.append(self._opaque(node.orelse[0], f"`else` of line {node.lineno}",
                                        "the condition is not on parameters only", node.orelse, depth - 1, loopvars,
                                        cond=None if cond is None else _not(cond)))
            return out
        return [Branch(cond, self.block(node.body, depth, loopvars), self.block(node.orelse, depth, loopvars),
                       node.lineno)]

    # -- guards and expressions ----------------------------------------------------------------
    def _condition(self, test):
        """:meth:`condition`, its sympy expression deferred when the condition is affine."""
        c = cond_form(self, test)
        return self.condition(test) if c is None else Deferred(lambda: self.condition(test), c)

    def guard(self, test) -> tuple[sp.Expr, ...]:
        """``a < b and c >= d`` -> slacks ``(b - a, c - d + 1)`` (integers: ``x >= y`` iff ``x - y + 1 > 0``)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return tuple(s for v in test.values for s in self.guard(v))
        if not isinstance(test, ast.Compare):
            raise _Outside("the guard is not a comparison")
        out, left = [], self.expr(test.left, {})
        for op, right_node in zip(test.ops, test.comparators):
            right = self.expr(right_node, {})
            if not isinstance(op, _CMP):
                raise _Outside(f"comparison {type(op).__name__} in the guard")
            if isinstance(op, ast.Lt):
                out.append(right - left)
            elif isinstance(op, ast.LtE):
                out.append(right - left + 1)
            elif isinstance(op, ast.Gt):
                out.append(left - right)
            else:
                out.append(left - right + 1)
            left = right
        return tuple(out)

    def condition(self, test) -> sp.Basic:
        if isinstance(test, ast.BoolOp):
            parts = [self.condition(v) for v in test.values]
            return sp.And(*parts) if isinstance(test.op, ast.And) else sp.Or(*parts)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return sp.Not(self.condition(test.operand))
        if isinstance(test, ast.Compare):  # `a < b <= c` is `a < b and b <= c`
            rel = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge, ast.Eq: sp.Eq, ast.NotEq: sp.Ne}
            terms = [self.expr(t, {}) for t in (test.left, *test.comparators)]
            fs = [rel.get(type(op)) for op in test.ops]
            if all(f is not None for f in fs):
                return sp.And(*[f(a, b) for f, a, b in zip(fs, terms, terms[1:])])
        raise _Outside("unsupported condition")

    def expr(self, node, env, bound: bool = False) -> sp.Expr:
        if isinstance(node, ast.Name):
            if node.id in self.itvars:
                return sym(node.id)
            if node.id in self.data:
                raise _Outside(f"`{node.id}` is computed from data")
            if node.id in ("True", "False", "None"):
                raise _Outside(node.id)
            self.size_names.add(node.id)
            return sym(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # `i % 3`: a constant modulus only
            a, b = self.expr(node.left, env), self.expr(node.right, env)
            if not (b.is_Integer and b > 0):
                raise _Outside(f"`{ast.unparse(node)}` is not a remainder by a positive integer constant")
            return sp.Mod(a, b)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            a, b = self.expr(node.left, env), self.expr(node.right, env)
            if b == 0:
                raise self.err(node, "division by zero")
            return a / b
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            raise _Outside(f"`{ast.unparse(node)}` reads data")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
            raise _Outside(f"`{ast.unparse(node)}` is a call")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            raise _Outside(f"constant {node.value!r} is not an integer")
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords:
            return _min_max(node.func.id, [self.expr(a, env) for a in node.args])
        try:
            return super().expr(node, env, bound=True)
        except ParseError as err:
            raise _Outside(err.bare_message) from None
