"""Statement groups that share no tile variable (solvers/soap/groups.py): χ_H(X) ≤ Σ_g χ_g(X).

covariance's ``{mean, cov}`` reads ``data`` as ``data[i, j]`` (mean) and ``data[k, i']``, ``data[k, j']``
(cov, a triangular pair of thesis section 4.6.2).  The mean's read overlaps both, so the three are one
union and the pair is not two arrays there (counting it so gave the published ``M²N/√S``, which the
triangle-block schedule beats at large sizes: tests/solvers/test_soap_counter_schedules.py); the statement
groups still split, each with its restriction of the union, and the cov group's restriction — the pair
alone — is counted with coinciding rows (models/soap/coincide.py): ``M²N/(√2·√S)``."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import sympy as sp

from meshplan.models.soap import build_sdg, parse_file, subgraph_problem
from meshplan.models.soap.expand import expand_temporaries
from meshplan.models.soap.scalars import split_scalars
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S, X, intensity, rho_value_at
from meshplan.solvers.soap.groups import independent_groups

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def _problem(name, arrays):
    (p,) = parse_file(str(EX / f"{name}.py"))
    p, _ = split_scalars(p)
    p, _ = expand_temporaries(p)
    return subgraph_problem(build_sdg(p), arrays)


def test_covariance_mean_and_cov_split_into_two_groups_and_the_pair_stays_in_the_union():
    prob = _problem("covariance", ("mean", "cov"))
    (u,) = [t for t in prob.terms if t.array == "data"]
    assert u.kind == "union" and len(u.parts) == 3 and u.sums == () and u.coincide
    groups = independent_groups(prob)
    assert len(groups) == 2
    cov = next(g for g in groups if len(g.classes) == 3)
    (cu,) = [t for t in cov.terms if t.array == "data"]
    # the pair alone, with coinciding rows: |D^j3|·|D^k| + |D^i3|·|D^k|/2 (was the union, its largest part)
    assert cu.kind == "pair" and sorted(cu.parts) == [(("k",), ("i_3",)), (("k",), ("j_3",))]
    rho = intensity(prob).rho
    assert abs(rho_value_at(rho, 2.0 ** 60) / 2.0 ** 30 - 2 ** -0.5) < 1e-6   # ρ ~ √(S/2) (√S as a union)
    (p,) = parse_file(str(EX / "covariance.py"))
    assert str(analyze(p).leading) == "sqrt(2)*M**2*N/(2*sqrt(S))"       # 1/√2 of the published entry


def _access(problem):
    f = sp.lambdify([list(problem.symbols.values())], problem.access_expr())
    return lambda D: float(f([D[c] for c in problem.classes]))


def test_each_group_sees_at_most_the_whole_access_and_the_sum_of_chis_bounds_every_tile():
    """For every tile, the access of each group's problem at its restriction is at most the whole problem's
    (so a tile feasible for St_H is feasible for every St_g), and the work of every integer tile whose
    access fits X is at most Σ_g χ_g(X) (brute force).  A group's ``pair`` term (the triangular pair with
    coinciding rows) is not compared tile by tile: it bounds a real tile's access at another point of the
    same work (models/soap/coincide.py; its counting fact is checked by brute force in
    tests/solvers/test_soap_coinciding_pairs.py); here it must stay below the two parts' sum."""
    rng = random.Random(29)
    for name, arrays in (("covariance", ("mean", "cov")), ("correlation", ("mean", "corr")),
                         ("correlation", ("stddev", "corr"))):
        prob = _problem(name, arrays)
        groups = independent_groups(prob)
        assert len(groups) == 2, (name, arrays)
        F, Fg = _access(prob), [_access(replace(g, terms=tuple(t for t in g.terms if t.kind != "pair")))
                                for g in groups]
        pairs = [t for g in groups for t in g.terms if t.kind == "pair"]
        for _ in range(200):
            D = {c: rng.choice([1, 2, 3, 5, 8, 13, 40]) for c in prob.classes}
            for f in Fg:
                assert f(D) <= F(D) * (1 + 1e-12)
            Ds = {c: sp.Integer(v) for c, v in D.items()}
            for t in pairs:
                assert t.size(Ds) <= sum(sp.Mul(*[Ds[d[0]] for d in part]) for part in t.parts)
        chi = sp.lambdify([X], intensity(prob).chi)
        P = sp.lambdify([list(prob.symbols.values())], prob.work_expr())
        for D in itertools.product([1, 2, 4, 9], repeat=len(prob.classes)):
            assert P(D) <= chi(F(dict(zip(prob.classes, D)))) * (1 + 1e-9), (name, D)
