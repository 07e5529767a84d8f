"""SOAP program representation (thesis section 5.3).

A :class:`Program` is a sequence of statements; each :class:`Statement` sits in
a loop nest (its :class:`Loop` tuple, outermost first), writes one array
element through an :class:`Access` and reads others.  Loop bounds and array
subscripts are sympy expressions in the iteration variables and the program's
size parameters.  Loop variables are unique within a program: statements that
share an enclosing loop share the variable (the frontends rename reused names
``i`` to ``i_2``, …), which is how the dataflow analysis tells "the same
iteration of ``t``" from "another loop also called ``i``".

``Program.to_source()`` prints the program as a plain Python loop nest that
:func:`meshplan.models.loops.frontend.parse_source` reads back (a tested round
trip).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from meshplan.models.core.errors import ModelError

__all__ = ["Loop", "Access", "Statement", "Program", "sym"]

_SYMS: dict[str, sp.Symbol] = {}


def sym(name: str) -> sp.Symbol:
    """The one sympy symbol (integer) used for ``name`` in SOAP programs."""
    s = _SYMS.get(name)
    if s is None:
        s = _SYMS[name] = sp.Symbol(name, integer=True)
    return s


@dataclass(frozen=True, slots=True)
class Loop:
    """``for var in range(lower, upper, step)`` (``upper`` exclusive).

    ``descending`` visits the same set in the opposite order: ``range(upper - 1, lower - 1, -1)``
    (the frontend's reading of ``range(hi, lo, -1)``; only with ``step == 1``).  The iteration set
    — what the SOAP χ and the vertex counts use — does not depend on it; the program order, and with
    it which instance produces the value a read sees, does.
    """

    var: str
    lower: sp.Expr
    upper: sp.Expr
    step: int = 1
    descending: bool = False

    def __post_init__(self) -> None:
        if not self.var.isidentifier():
            raise ModelError(f"loop variable {self.var!r} is not an identifier")
        if self.step == 0:
            raise ModelError(f"loop over {self.var} has step 0; use a non-zero constant step")
        if self.descending and self.step != 1:
            raise ModelError(f"descending loop over {self.var} has step {self.step}: only "
                             "range(hi, lo, -1) loops are descending; give step 1")
        for e in (self.lower, self.upper):
            if not isinstance(e, sp.Expr):
                raise ModelError(f"bounds of loop {self.var} must be sympy expressions")
            if sym(self.var) in e.free_symbols:
                raise ModelError(f"loop {self.var} has a bound that depends on {self.var} itself")

    @property
    def symbol(self) -> sp.Symbol:
        """The loop variable as a sympy symbol."""
        return sym(self.var)

    def source(self) -> str:
        """The loop header as Python source (``for i in range(N):``)."""
        lo, hi = _py(self.lower), _py(self.upper)
        if self.descending:
            return f"for {self.var} in range({_py(self.upper - 1)}, {_py(self.lower - 1)}, -1):"
        if self.step != 1:
            return f"for {self.var} in range({lo}, {hi}, {self.step}):"
        if self.lower == 0:
            return f"for {self.var} in range({hi}):"
        return f"for {self.var} in range({lo}, {hi}):"


@dataclass(frozen=True, slots=True)
class Access:
    """``array[index_0, …, index_{d-1}]``; a scalar has an empty index."""

    array: str
    index: tuple[sp.Expr, ...]

    def __post_init__(self) -> None:
        if not self.array.isidentifier():
            raise ModelError(f"array name {self.array!r} is not an identifier")

    @property
    def dims(self) -> int:
        """The number of array dimensions indexed."""
        return len(self.index)

    def __str__(self) -> str:
        if not self.index:
            return self.array
        return f"{self.array}[{', '.join(_py(e) for e in self.index)}]"


@dataclass(frozen=True, slots=True)
class Statement:
    """One SOAP statement: ``output op f(inputs)`` in its loop nest.

    ``op`` is ``"="`` or an augmented operator (``"+="``…); an augmented
    assignment reads its output too (the frontends add that read to
    ``inputs``).  ``text`` is the right-hand side as written (for printing).
    """

    name: str
    loops: tuple[Loop, ...]
    output: Access
    inputs: tuple[Access, ...]
    op: str = "="
    text: str = ""
    line: int | None = None

    def __post_init__(self) -> None:
        seen = set()
        for lp in self.loops:
            if lp.var in seen:
                raise ModelError(f"statement {self.name}: loop variable {lp.var} is nested twice")
            seen.add(lp.var)
        inner = set()
        for lp in self.loops:
            later = {sym(v) for v in seen - inner - {lp.var}}
            bad = (lp.lower.free_symbols | lp.upper.free_symbols) & later
            if bad:
                raise ModelError(f"statement {self.name}: bound of loop {lp.var} uses inner loop variable "
                                 f"{sorted(map(str, bad))[0]} (condition 2 of section 5.3)")
            inner.add(lp.var)

    @property
    def vars(self) -> tuple[str, ...]:
        """The loop variables, outermost first."""
        return tuple(lp.var for lp in self.loops)

    @property
    def reads(self) -> tuple[Access, ...]:
        """The distinct accesses the statement reads, in order of first appearance (``A[i, i] * A[i, i]``
        reads ``A[i, i]`` once): a trace's access columns are these, then the output."""
        out: list[Access] = []
        for a in self.inputs:
            if a not in out:
                out.append(a)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Program:
    """A sequence of statements with size parameters ``params``."""

    name: str
    statements: tuple[Statement, ...]
    params: tuple[str, ...] = field(default=())
    source_name: str | None = None

    def __post_init__(self) -> None:
        if not self.statements:
            raise ModelError(f"program {self.name!r} has no statement writing an array inside a loop")
        names = [s.name for s in self.statements]
        if len(set(names)) != len(names):
            raise ModelError(f"program {self.name!r}: statement names are not unique")

    @property
    def arrays(self) -> tuple[str, ...]:
        """Every array the program reads or writes, in order of first appearance."""
        out: list[str] = []
        for st in self.statements:
            for a in (st.output, *st.inputs):
                if a.array not in out:
                    out.append(a.array)
        return tuple(out)

    def writers(self, array: str) -> tuple[Statement, ...]:
        """The statements that write ``array``."""
        return tuple(s for s in self.statements if s.output.array == array)

    def statement(self, name: str) -> Statement:
        """The statement called ``name``; raises :class:`ModelError` when there is none."""
        for s in self.statements:
            if s.name == name:
                return s
        raise ModelError(f"program {self.name!r} has no statement {name!r}")

    def to_source(self) -> str:
        """The program as a plain Python loop nest (one function)."""
        lines = [f"def {self.name}({', '.join(self.params)}):"]
        open_loops: list[Loop] = []
        for st in self.statements:
            common = 0
            while (common < len(open_loops) and common < len(st.loops)
                   and open_loops[common] == st.loops[common]):
                common += 1
            open_loops = open_loops[:common]
            for lp in st.loops[common:]:
                lines.append("    " * (len(open_loops) + 1) + lp.source())
                open_loops.append(lp)
            reads = [a for a in st.inputs if not (st.op != "=" and a == st.output)]
            rhs = st.text or (" * ".join(str(a) for a in reads) if reads else "0")
            lines.append("    " * (len(open_loops) + 1) + f"{st.output} {st.op} {rhs}")
        return "\n".join(lines) + "\n"


def _py(e: sp.Expr) -> str:
    """Python source of an index/bound expression (``//`` for floor division)."""
    from sympy.printing.pycode import PythonCodePrinter

    class _P(PythonCodePrinter):
        def _print_floor(self, expr):  # noqa: N802 - sympy API
            a, b = expr.args[0].as_numer_denom()
            return f"({self._print(a)}) // ({self._print(b)})"

    return _P().doprint(e)
