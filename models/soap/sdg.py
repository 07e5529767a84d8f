"""Symbolic directed graph and subgraph statements (Definitions 5.5, 5.6).

The SDG has one vertex per array and an edge ``A -> B`` when a statement
reads ``A`` and writes ``B``.  For a set ``H`` of computed arrays,
:func:`subgraph_problem` builds the subgraph SOAP statement ``St_H`` as the
optimization problem of section 5.4.5: tile variables (loop variables of the
statements that write ``H``, identified through producer/consumer accesses),
the work ``Σ_s ∏ |D|`` and the access terms whose sizes bound the dominator set:

* arrays outside ``H``: inputs, Lemma 5.3 per simple-overlap group;
* arrays in ``H``: Corollary 5.1 over the output and every read that is a
  constant translation of it (same statement: the update, section 5.5.2;
  another statement of ``H``: fused stencil reads);
* reads of an ``H`` array that are no translation of an output: separate input
  arrays (section 5.5.1) when the array's self-edge is preserved (no other
  array of ``H`` feeds it), otherwise dropped (Definition 5.6);
* input groups of one array whose sets overlap: a bounded-overlap union
  (at least its largest part; :mod:`cases` splits the max), except the
  triangular pair of section 4.6.2 (``A[i,k]``, ``A[j,k]`` with ``j ≤ i``),
  which the thesis counts as two arrays.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy as sp

from meshplan.models.soap.access import Component, components
from meshplan.models.loops.program import Program
from meshplan.models.soap.symbolic import simplified
from meshplan.models.soap.dead import constant_in_tile, input_free_writers
from meshplan.models.soap.internal import internal_reads
from meshplan.models.soap.coincide import coinciding_pairs
from meshplan.models.soap.terms import (Term, UnionFind, access_text, box, default_size, input_terms, merge_writers,
                                        tile_symbol)

__all__ = ["Term", "SubProblem", "Sdg", "build_sdg", "subgraph_problem", "tile_symbol"]


@dataclass(frozen=True)
class SubProblem:
    """``St_H``: maximize ``work`` subject to ``Σ terms ≤ X`` over tile sizes ≥ 1."""

    arrays: tuple[str, ...]
    statements: tuple[str, ...]
    classes: tuple[str, ...]
    members: dict = field(hash=False)     # the classes' members: determined by the other fields
    work: tuple[tuple[str, tuple[str, ...]], ...]
    terms: tuple[Term, ...]
    notes: tuple[str, ...] = field(default=())
    #: order constraints of a max case (section 5.5.3): ``∏ D_v^{e_v} ≤ 1`` as ``(v, e_v)`` pairs
    constraints: tuple = field(default=())
    case: str = ""

    @property
    def symbols(self) -> dict[str, sp.Symbol]:
        """The tile-size symbol ``|D^c|`` of every tile class."""
        return {c: tile_symbol(c) for c in self.classes}

    def work_expr(self, D: dict[str, sp.Expr] | None = None) -> sp.Expr:
        """The work ``P(D) = Σ_s ∏ D`` as a sympy expression (of the tile symbols unless ``D`` is given)."""
        D = D or self.symbols
        return sp.Add(*[sp.Mul(*[D[c] for c in cls]) for _, cls in self.work])

    def access_expr(self, D: dict[str, sp.Expr] | None = None) -> sp.Expr:
        """The access-size bound ``F(D) = Σ_j |A_j(D)|`` as a sympy expression."""
        if D is None:
            return sp.Add(*[default_size(t) for t in self.terms])
        return sp.Add(*[t.size(D) for t in self.terms])

    @property
    def name(self) -> str:
        """The subgraph's arrays as ``{A, B}``."""
        return "{" + ", ".join(self.arrays) + "}"


@dataclass(frozen=True)
class Sdg:
    """Definition 5.5: vertices are arrays, edges read -> written."""

    program: Program
    comps: dict  # statement name -> list[Component]
    vertices: tuple[str, ...]
    edges: frozenset
    inputs: tuple[str, ...]
    #: input terms by (array, components with their classes): most subgraphs share an input's accesses
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def computed(self) -> tuple[str, ...]:
        """The vertices that are computed (not inputs)."""
        return tuple(v for v in self.vertices if v not in self.inputs)

    def connected_subsets(self, max_size: int = 4, through=frozenset(), min_size: int = 1):
        """Sets of computed arrays connected by dataflow or shared inputs (the subgraphs ``H``).

        Fusing arrays that share no data cannot raise the intensity (the
        fast memory is split between them), so other subsets are skipped.
        Arrays in ``through`` are left out of the sets, and two arrays
        connected by a path through them count as adjacent (so every set
        connected in the full graph, minus its ``through`` arrays, is listed).  Sets of
        ``min_size`` to ``max_size`` arrays, smaller ones first.
        """
        full = self.computed
        adj = {v: set() for v in full}
        for a, b in self.edges:
            if a in adj and b in adj and a != b:
                adj[a].add(b)
                adj[b].add(a)
        reads = {v: {a for a, b in self.edges if b == v} for v in full}
        for a, b in itertools.combinations(full, 2):
            if reads[a] & reads[b]:  # shared inputs: fusing can reuse them (bicg)
                adj[a].add(b)
                adj[b].add(a)
        comp = tuple(v for v in full if v not in through)
        if through:
            contracted = {}
            for a in comp:
                seen, todo, out = {a}, [a], set()
                while todo:
                    for y in adj[todo.pop()] - seen:
                        seen.add(y)
                        (todo.append if y in through else out.add)(y)
                contracted[a] = out - {a}
            adj = contracted
        seen: set[frozenset] = set()
        out = []
        for r in range(max(min_size, 1), min(max_size, len(comp)) + 1):
            for sub in itertools.combinations(comp, r):
                s = frozenset(sub)
                if s in seen:
                    continue
                start = sub[0]
                reach, todo = {start}, [start]
                while todo:
                    x = todo.pop()
                    for y in adj[x] & s:
                        if y not in reach:
                            reach.add(y)
                            todo.append(y)
                if reach == s:
                    seen.add(s)
                    out.append(sub)
        return out


def build_sdg(program: Program) -> Sdg:
    """The symbolic directed graph of a program (section 5.3): its arrays and the access components of every
    statement."""
    comps = {st.name: components(program, st, n) for n, st in enumerate(program.statements)}
    vertices = program.arrays
    edges = set()
    for st in program.statements:
        for a in st.inputs:
            edges.add((a.array, st.output.array))
    written = {st.output.array for st in program.statements}
    inputs = tuple(v for v in vertices if v not in written)
    return Sdg(program, comps, vertices, frozenset(edges), inputs)


def subgraph_problem(sdg: Sdg, H, *, sample_size: int = 5, exclude=frozenset()) -> SubProblem:
    """The subgraph statement ``St_H`` of Definition 5.6 as a :class:`SubProblem`.

    ``exclude`` names statements left out (their work and accesses): statements whose own
    work no access bounds (χ = ∞), so that they cannot zero the bound of the others."""
    prog = sdg.program
    H = tuple(a for a in sdg.computed if a in set(H))
    stmts = [st for st in prog.statements if st.output.array in H and st.name not in exclude]
    owner: dict[str, set[str]] = {}
    for st in stmts:
        for v in st.vars:
            owner.setdefault(v, set()).add(st.name)
    uf = UnionFind(list(owner))
    comps = [c for st in stmts for c in sdg.comps[st.name]]
    outs = [c for c in comps if c.role == "out"]
    notes: list[str] = []

    def current_classes(c: Component):
        return tuple(tuple(uf.find(v) for v, _ in d) for d in c.dims)

    def try_unify(c: Component, o: Component, spatial_only: bool = False) -> bool:
        """Identify c's variables with o's dimension by dimension (no clash within a statement)."""
        if len(c.dims) != len(o.dims) or c.residues != o.residues:
            return False
        if not spatial_only and len(c.version) != len(o.version) and not (c.stmt != o.stmt and not c.version):
            return False
        pairs = []
        for dc, do in zip(c.dims, o.dims):
            if len(dc) != len(do) or len(dc) > 1:
                if dc != do:
                    return False
                continue
            if dc and do:
                if dc[0][1] != do[0][1]:
                    return False
                pairs.append((dc[0][0], do[0][0]))
        if len(c.version) == len(o.version) and not spatial_only:
            pairs += list(zip(c.version, o.version))
        trial = dict(uf.p)
        tuf = UnionFind([])
        tuf.p = trial
        for a, b in pairs:
            tuf.union(a, b)
        groups: dict[str, set[str]] = {}
        for v in owner:
            groups.setdefault(tuf.find(v), set()).add(v)
        for g in groups.values():
            per_stmt = [n for v in g for n in owner[v]]
            if len(per_stmt) != len(set(per_stmt)):
                return False
        uf.p = trial
        return True

    fed_by_other = {a: any((b, a) in sdg.edges for b in H if b != a) for a in H}
    # 0) statements writing the same array element by element: one chain of versions
    for n, o2 in enumerate(outs):
        for o1 in outs[:n]:
            if o1.array == o2.array and o1.stmt != o2.stmt:
                try_unify(o2, o1, spatial_only=True)
    # 1) identify variables through reads of H arrays that translate an output
    matched: dict[int, Component] = {}
    for i, c in enumerate(comps):
        if c.role == "out" or c.array not in H:
            continue
        cands = [o for o in outs if o.array == c.array]
        cands.sort(key=lambda o: (o.stmt != c.stmt, o.order))
        for o in cands:
            final = c.stmt != o.stmt and not c.version  # a later statement reads the last version
            if try_unify(c, o) and current_classes(c) == current_classes(o) and \
                    (final or tuple(uf.find(v) for v in c.version) == tuple(uf.find(v) for v in o.version)):
                matched[i] = o
                break

    terms: list[Term] = []
    order = {st.name: n for n, st in enumerate(prog.statements)}
    # the classes are final from here on: each component's classes once
    known: dict[int, tuple] = {}

    def classes_of(c: Component):
        got = known.get(id(c))
        if got is None:
            got = known[id(c)] = current_classes(c)
        return got

    # 2) Corollary 5.1 groups for arrays of H (writers with the same spatial access form one chain)
    constant = {st.name for st in stmts if not st.inputs}
    stmt_vars = {st.name: st.vars for st in stmts}
    input_free: set[str] = set()   # writers on no path from an input: their work is left out below
    done: set[int] = set()
    own_chain: list[bool] = []     # per Corollary 5.1 term: no other statement reads its values (section 4.4.2)
    for n, o in enumerate(outs):
        if n in done:
            continue
        key = (o.array, classes_of(o), o.residues)
        members = [m for m, p in enumerate(outs) if (p.array, classes_of(p), p.residues) == key]
        done.update(members)
        group = []
        for m in members:
            group += [outs[m]] + [c for i, c in enumerate(comps) if matched.get(i) is outs[m]]
        dims, t = box(group, classes_of(o))
        vers = []
        for c in group:
            if c.role == "out":
                vers.append(0)
            elif c.stmt == matched_stmt(c, group) or order[c.stmt] <= order[_writer_of(c, group)]:
                vers.append(-1)
            else:
                vers.append(0)
        vclasses = tuple(dict.fromkeys(uf.find(v) for m in members for v in outs[m].version))
        halo: tuple = ()
        if vclasses and any(t):
            timed = [k for k, c in enumerate(group) if set(vclasses) <= {uf.find(v) for v in stmt_vars[c.stmt]}]
            if len(timed) < len(group) and not any(box([group[k] for k in timed], classes_of(o))[1]):
                halo, t = t, (0,) * len(t)     # the halo is read outside the version loops: once, not per version
                vers = [vers[k] for k in timed]
        if vclasses:
            tv = len(set(vers)) - 1
        else:  # no version loop: only an in-place read of the very element is an older version
            outs_off = {tuple(simplified(x) for x in g.offsets) for g in group if g.role == "out"}
            fixed = input_free_writers(group, vers, outs_off, order, constant, sdg)
            tv = int(any(v == -1 and tuple(simplified(x) for x in c.offsets) in outs_off
                         and not constant_in_tile(c, group, order, fixed)
                         for c, v in zip(group, vers)))
        if not vclasses and not {g.stmt for g in group if g.role == "out"} <= fixed:
            input_free |= fixed   # (a chain with no input at all has no term bounding it: excluded later)
        terms.append(Term(o.array, "inout", dims, t, vclasses, tv, label=access_text(o.access)))
        writers = {outs[m].stmt for m in members}
        own_chain.append(not any(c.stmt not in writers for c in group))
        if halo:    # its spatial surface ∏ D − ∏ (D − halo), once
            terms.append(Term(o.array, "inout", dims, halo, (), 0, label=f"{access_text(o.access)} (halo)"))
            own_chain.append(False)
            notes.append(f"{o.array}: the translated reads of statements outside the version loops "
                         f"({', '.join(vclasses)}) read one version of each neighbour: a halo term of the "
                         "box's spatial surface, not one per version (Corollary 5.1)")
    terms = merge_writers(terms, own_chain, notes)
    # 3) other reads
    inputs: dict[str, list[Component]] = {}
    internal: dict[str, list[Component]] = {}
    for i, c in enumerate(comps):
        if c.role == "out" or i in matched:
            continue
        if c.array in H:
            if c.role == "self" and not fed_by_other[c.array]:
                inputs.setdefault(c.array, []).append(c)
                notes.append(f"{c.stmt}: {access_text(c.access)} is no translation of {c.array}'s output: "
                             "a separate input array (section 5.5.1)")
            else:
                internal.setdefault(c.array, []).append(c)
            continue
        inputs.setdefault(c.array, []).append(c)
    for arr, cs in internal.items():
        terms = internal_reads(arr, cs, terms, comps, matched, classes_of, prog, H, notes, cls=uf.find)
    for arr, cs in inputs.items():
        key = (arr, sample_size, tuple((c, classes_of(c), tuple(uf.find(v) for v in c.version)) for c in cs))
        if key not in sdg.memo:     # input_terms reads nothing else of the subgraph
            said: list[str] = []
            sdg.memo[key] = (tuple(input_terms(arr, cs, classes_of, uf, prog, sample_size, said)), tuple(said))
        terms += sdg.memo[key][0]
        notes += sdg.memo[key][1]
    stmts = [st for st in stmts if st.name not in input_free]
    classes = tuple(dict.fromkeys(uf.find(v) for st in stmts for v in st.vars))
    work = tuple((st.name, tuple(uf.find(v) for v in st.vars)) for st in stmts)
    members = {cl: tuple(v for v in owner if uf.find(v) == cl) for cl in classes}
    return coinciding_pairs(SubProblem(H, tuple(st.name for st in stmts), classes, members, work, tuple(terms),
                                       tuple(dict.fromkeys(notes))), prog)


def matched_stmt(c: Component, group) -> str:
    """The statement of ``group``'s writers that component ``c`` is matched to: its own statement when
    that writes, else the first writer."""
    return _writer_of(c, group)


def _writer_of(c: Component, group) -> str:
    outs = [g for g in group if g.role == "out"]
    for o in outs:
        if o.stmt == c.stmt:
            return o.stmt
    return outs[0].stmt
