"""Frontends: plain Python loop nests (``ast``) and einsum strings.

Python input follows the thesis listings: functions whose bodies are nests of
``for v in range(...)`` loops around assignments to subscripted arrays, e.g.::

    def gemm(M, N, K):
        for i in range(M):
            for j in range(N):
                for k in range(K):
                    C[i, j] += A[i, k] * B[k, j]

Names used in loop bounds or subscripts (and not loop variables) are size
parameters; other free names are scalar constants (``alpha``…) and ignored.
A bare name assigned inside a loop is a 0-dimensional array.  ``range(hi, lo, -1)`` is a descending
:class:`~meshplan.models.loops.program.Loop` (the set of ``range(lo + 1, hi + 1)``, visited downwards:
the data flow is the program's own).  Anything else —
``if``/``while``, indirect subscripts ``A[B[i]]``, non-integer steps — is a
:class:`~meshplan.models.core.errors.ParseError` that names the line and says why
(data-dependent control flow or accesses are outside SOAP, section 5.3).
"""

from __future__ import annotations

import ast
import re

import sympy as sp

from meshplan.models.core.errors import ParseError
from meshplan.models.core.limits import check_limit, limit
from meshplan.models.loops.program import Access, Loop, Program, Statement, sym

__all__ = ["parse_source", "parse_einsum", "parse_file", "functions"]

_AUG = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.FloorDiv: "//=",
        ast.Mod: "%=", ast.Pow: "**=", ast.BitOr: "|=", ast.BitAnd: "&=", ast.BitXor: "^="}
_ALLOWED_CALLS = {"range"}


def parse_file(path: str, *, function: str | None = None) -> list[Program]:
    """The loop programs of the Python file at ``path`` (only ``function`` when given); an unreadable file
    is a :class:`ParseError`."""
    from meshplan.models.core.files import read_text

    text = read_text(path, what="Python file")
    return parse_source(text, source=path, function=function)


def parse_source(text: str, *, source: str | None = None, function: str | None = None) -> list[Program]:
    """Every function of ``text`` as a :class:`Program` (or only ``function``)."""
    return [_Reader(source).program(f) for f in functions(text, source=source, function=function)]


def functions(text: str, *, source: str | None = None, function: str | None = None,
              whole_module: bool = False) -> list[ast.FunctionDef]:
    """The function definitions of ``text`` (or only ``function``); a bare loop nest at module level is
    one function ``main`` (with ``whole_module``, all module-level code is).  Shared by
    :func:`parse_source` and the counting frontend (:mod:`meshplan.models.loops.flow_frontend`)."""
    tree = _parse_python(text, source)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not funcs:
        loops = [n for n in tree.body if isinstance(n, (ast.For, ast.While) if whole_module else ast.For)]
        if loops and whole_module:
            loops = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
        if loops:  # a bare loop nest at module level is one program
            funcs = [ast.FunctionDef(name="main", args=ast.arguments([], [], None, [], [], None, []),
                                     body=loops, decorator_list=[], lineno=loops[0].lineno)]
        else:
            raise ParseError("no function with a loop nest found; write `def kernel(N): for i in range(N): ...`",
                             source=source, line=1)
    if function is not None:
        funcs = [f for f in funcs if f.name == function]
        if not funcs:
            names = ", ".join(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
            raise ParseError(f"no function {function!r} (functions: {names or 'none'})", source=source)
    return funcs


def _parse_python(text: str, source: str | None) -> ast.Module:
    """``ast.parse`` of a loop program whose syntax tree is at most ``limit("nesting")`` deep (checked without
    recursion); the readers after it recurse over the tree, so a raised limit raises Python's recursion limit
    with it."""
    import sys

    most = limit("nesting")
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, most + 2000))  # building the tree recurses (3 levels per frame)
    try:
        tree = ast.parse(text, filename=source or "<input>")
    except SyntaxError as err:
        raise ParseError(f"not valid Python: {err.msg}", line=err.lineno, column=err.offset,
                         source=source) from err
    except (RecursionError, MemoryError):
        raise ParseError(f"the program nests too deeply for Python to parse (more than {most:,} levels of "
                         f"operands, loops or brackets; the limit is MESHPLAN_MAX_NESTING={most})",
                         source=source) from None
    finally:
        sys.setrecursionlimit(old)
    depth, level = 0, [tree]  # the tree's depth, level by level (no recursion, no pair per node)
    while True:
        level = [c for n in level for c in _children(n)]
        if not level:
            break
        depth += 1
    if depth > most:
        node, stack = None, [(tree, 0)]  # the first deepest node, for the message
        while stack and node is None:
            n, d = stack.pop()
            node = n if d == depth else None
            stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
        where = getattr(node, "lineno", None)
        check_limit("nesting", depth, f"{source or 'the program'}" + (f" (line {where})" if where else ""))
    if depth > 250:  # a raised limit: the recursive readers need the room (3 frames per level)
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * depth + 1000))
    return tree


def _children(node) -> list:
    """``list(ast.iter_child_nodes(node))`` without its generators (run once per node of a parsed program; a
    node's fields are read from its ``__dict__``, where ``ast.parse`` puts them)."""
    out = []
    d = node.__dict__
    for name in node._fields:
        v = d.get(name)
        if isinstance(v, ast.AST):
            out.append(v)
        elif v.__class__ is list:
            for x in v:
                if isinstance(x, ast.AST):
                    out.append(x)
    return out


class _Reader:
    def __init__(self, source: str | None) -> None:
        self.source = source

    def err(self, node: ast.AST, msg: str) -> ParseError:
        return ParseError(msg, line=getattr(node, "lineno", None),
                          column=(getattr(node, "col_offset", -1) + 1) or None, source=self.source)

    def program(self, fn: ast.FunctionDef) -> Program:
        self.params: list[str] = [a.arg for a in fn.args.args]
        self.size_names: set[str] = set()
        self.used_vars: dict[str, int] = {}
        self.statements: list[Statement] = []
        self.scalars: set[str] = set()
        # scalars: bare names assigned inside a loop
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in tgts:
                    if isinstance(t, ast.Name):
                        self.scalars.add(t.id)
        self.block(fn.body, (), {}, top=True)
        check_limit("statements", len(self.statements), f"function {fn.name}")
        if not self.statements:
            raise self.err(fn, f"function {fn.name} has no assignment to an array inside a loop")
        self.check_ranks(fn)
        params = [p for p in self.params if p in self.size_names]
        params += sorted(self.size_names - set(params))
        return Program(fn.name, tuple(self.statements), tuple(params), self.source)

    def check_ranks(self, fn: ast.FunctionDef) -> None:
        """An array is subscripted with the same number of indices everywhere: ``A[i]`` and ``A[i, j]``
        in one program would be two different arrays sharing a name (the element sets of section 5.2
        are then ill-defined)."""
        ranks: dict[str, int] = {}
        for st in self.statements:
            for acc in (*st.inputs, st.output):
                seen = ranks.setdefault(acc.array, len(acc.index))
                if seen != len(acc.index):
                    raise self.err(fn, f"array {acc.array} is subscripted with {seen} and with {len(acc.index)} "
                                       f"indices in function {fn.name}; give each array one number of indices")

    # -- statements ------------------------------------------------------
    def block(self, body, loops: tuple[Loop, ...], env: dict[str, str], top: bool = False) -> None:
        for node in body:
            if isinstance(node, ast.For):
                self.loop(node, loops, env)
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                if not loops:
                    if top:
                        continue  # set-up code outside loops (e.g. `s = 0.0`) is not a statement
                self.assign(node, loops, env)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstring
            elif isinstance(node, (ast.Pass, ast.Return)) and (top or isinstance(node, ast.Pass)):
                continue
            elif isinstance(node, (ast.Import, ast.ImportFrom)) and top:
                continue
            elif isinstance(node, ast.If):
                raise self.err(node, "`if` inside a loop nest: data-dependent control flow is outside SOAP "
                                     "(section 5.3, condition 2); split the kernel into branch-free loop nests")
            elif isinstance(node, ast.While):
                raise self.err(node, "`while` loop: iteration domains must be `range(...)` loops "
                                     "(section 5.3, condition 2)")
            else:
                raise self.err(node, f"unsupported statement {type(node).__name__}: only `for ... in range(...)` "
                                     "loops and assignments to array elements are understood")

    def loop(self, node: ast.For, loops: tuple[Loop, ...], env: dict[str, str]) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.err(node, "loop target must be a single name (`for i in range(N)`)")
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and 1 <= len(it.args) <= 3 and not it.keywords):
            raise self.err(node, "loops must iterate over `range(...)` with 1 to 3 arguments "
                                 "(section 5.3: domains are integer ranges)")
        if node.orelse:
            raise self.err(node, "`for ... else` is not supported")
        args = [self.expr(a, env, bound=True) for a in it.args]
        if len(args) == 1:
            lo, hi, step = sp.Integer(0), args[0], 1
        else:
            lo, hi = args[0], args[1]
            step = 1
            if len(args) == 3:
                if not args[2].is_Integer or args[2] == 0:
                    raise self.err(it, "the step of `range` must be a non-zero integer constant")
                step = int(args[2])
        descending = step < 0   # range(hi0, lo0, -1): the set of range(lo0 + 1, hi0 + 1), visited downwards
        if descending:
            if step != -1:
                raise self.err(it, "negative steps other than -1 are not supported")
            lo, hi, step = hi + 1, lo + 1, 1
        name = node.target.id
        if name in env:
            raise self.err(node, f"loop variable {name} shadows an enclosing loop variable")
        uniq, n = name, 1
        while uniq in self.used_vars or uniq in self.params:
            n += 1
            uniq = f"{name}_{n}"
        self.used_vars[uniq] = 1
        lp = Loop(uniq, sp.sympify(lo), sp.sympify(hi), step, descending)
        self.block(node.body, loops + (lp,), {**env, name: uniq})

    def assign(self, node, loops, env) -> None:
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                raise self.err(node, "chained assignment `a = b = ...` is not supported")
            target, value, op = node.targets[0], node.value, "="
        else:
            target, value = node.target, node.value
            op = _AUG.get(type(node.op))
            if op is None:
                raise self.err(node, f"unsupported augmented operator {type(node.op).__name__}")
        out = self.access(target, env)
        if out.array in env:
            raise self.err(target, f"assignment to loop variable {out.array}")
        reads: list[Access] = []
        if op != "=":
            reads.append(out)
        self.collect_reads(value, env, reads)
        name = f"S{len(self.statements) + 1}"
        try:
            text = ast.unparse(value)
        except Exception:  # pragma: no cover - ast.unparse handles every parsed node
            text = ""
        self.statements.append(Statement(name, loops, out, tuple(reads), op, _rename(text, env), node.lineno))

    def access(self, node, env) -> Access:
        if isinstance(node, ast.Name):
            return Access(node.id, ())
        if isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name):
                raise self.err(node, "subscripted value must be an array name (`A[i, j]`)")
            sl = node.slice
            elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            idx = []
            for e in elts:
                if isinstance(e, ast.Slice):
                    raise self.err(e, "slices are not supported; write the loop explicitly")
                if any(isinstance(sub, ast.Subscript) for sub in ast.walk(e)):
                    raise self.err(e, "indirect access (an array inside a subscript) is data dependent: "
                                      "outside SOAP (section 5.3, condition 5)")
                idx.append(self.expr(e, env))
            return Access(node.value.id, tuple(idx))
        raise self.err(node, "assignment target must be an array element `A[i, j]` or a scalar name")

    def collect_reads(self, node, env, reads: list[Access]) -> None:
        if isinstance(node, ast.Subscript):
            reads.append(self.access(node, env))
            return
        if isinstance(node, ast.Name):
            if node.id in self.scalars and node.id not in env:
                reads.append(Access(node.id, ()))
            return
        if isinstance(node, ast.Call):
            for a in node.args:
                self.collect_reads(a, env, reads)
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp,
                             ast.NamedExpr, ast.Await, ast.Yield)):
            raise self.err(node, f"unsupported expression {type(node).__name__} in a statement")
        for child in ast.iter_child_nodes(node):
            self.collect_reads(child, env, reads)

    # -- index / bound expressions ----------------------------------------
    def expr(self, node, env, bound: bool = False) -> sp.Expr:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                raise self.err(node, f"subscripts and bounds must be integers, got {node.value!r}")
            return sp.Integer(node.value)
        if isinstance(node, ast.Name):
            if node.id in env:
                return sym(env[node.id])
            if node.id in self.scalars:
                raise self.err(node, f"{node.id} is computed by the program: data-dependent "
                                     "bounds/subscripts are outside SOAP (section 5.3)")
            self.size_names.add(node.id)
            return sym(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.expr(node.operand, env, bound)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = self.expr(node.left, env, bound), self.expr(node.right, env, bound)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return sp.floor(a / b)
            if isinstance(node.op, ast.Pow) and b.is_Integer and b >= 0:
                return a ** b
            raise self.err(node, f"operator {type(node.op).__name__} is not allowed in subscripts or bounds")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and bound and len(node.args) >= 2:
            args = [self.expr(a, env, bound) for a in node.args]
            return sp.Min(*args) if node.func.id == "min" else sp.Max(*args)
        raise self.err(node, f"cannot read {ast.unparse(node)!r} as an integer expression of loop variables "
                             "and size parameters")


def _rename(text: str, env: dict[str, str]) -> str:
    for old, new in env.items():
        if old != new:
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


_EINSUM = re.compile(r"^\s*([a-zA-Z]*(?:\s*,\s*[a-zA-Z]*)*)\s*(?:->\s*([a-zA-Z]*))?\s*$")


def parse_einsum(spec: str, *, name: str = "einsum") -> Program:
    """``"ij,jk->ik"`` as one statement ``Out[i,k] += A[i,j] * B[j,k]``.

    Index ``x`` ranges over ``range(N_x)``; operands are named ``A, B, C, …``
    and the output ``Out``.  Without ``->`` the output holds the indices that
    appear once, in alphabetical order (numpy's rule).
    """
    if not isinstance(spec, str) or "..." in spec:
        raise ParseError(f"einsum {spec!r}: ellipsis '...' is not supported; name every index")
    m = _EINSUM.match(spec)
    if not m:
        raise ParseError(f"einsum {spec!r} is malformed; expected e.g. 'ij,jk->ik'", source="einsum")
    ins = [s.strip() for s in m.group(1).split(",")]
    if any(s == "" for s in ins):
        raise ParseError(f"einsum {spec!r} has an empty operand", source="einsum")
    if len(ins) > 20:
        raise ParseError(f"einsum {spec!r} has more than 20 operands", source="einsum")
    letters = "".join(ins)
    if m.group(2) is None:
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    else:
        out = m.group(2)
    if len(set(out)) != len(out):
        raise ParseError(f"einsum {spec!r}: output index repeated", source="einsum")
    missing = set(out) - set(letters)
    if missing:
        raise ParseError(f"einsum {spec!r}: output index {sorted(missing)[0]!r} appears in no operand",
                         source="einsum")
    order: list[str] = []
    for c in out + letters:
        if c not in order:
            order.append(c)
    loops = tuple(Loop(c, sp.Integer(0), sym(f"N_{c}")) for c in order)
    names = [chr(ord("A") + k) if k < 26 else f"X{k}" for k in range(len(ins))]
    outacc = Access("Out", tuple(sym(c) for c in out))
    reads = [outacc] + [Access(n, tuple(sym(c) for c in s)) for n, s in zip(names, ins)]
    text = " * ".join(str(a) for a in reads[1:])
    st = Statement("S1", loops, outacc, tuple(reads), "+=", text)
    return Program(name, (st,), tuple(f"N_{c}" for c in order))
