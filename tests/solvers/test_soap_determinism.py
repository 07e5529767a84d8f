"""The SOAP derivation is deterministic: no clock, no signals, same answer in any process or thread."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sympy as sp

from meshplan.models.soap import parse_file
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import X
from meshplan.solvers.soap.polysys import Unsolved, solve_bounded

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
EXAMPLES = sorted(p.stem for p in EX.glob("*.py"))

_DIGEST = """
import json, sys
from pathlib import Path
from meshplan.models.soap import parse_file
from meshplan.solvers.soap.bound import analyze
out = {}
for name in sys.argv[1:]:
    (p,) = parse_file(str(Path(%r) / f"{name}.py"))
    r = analyze(p)
    out[name] = [str(r.bound), [[list(it.problem.arrays), it.method, str(it.chi), str(it.rho)] for it in r.subgraphs]]
print(json.dumps(out))
"""


def digest(r) -> list:
    """What must not change between runs: the bound and, per subgraph, the method, χ and ρ."""
    return [str(r.bound), [[list(it.problem.arrays), it.method, str(it.chi), str(it.rho)] for it in r.subgraphs]]


def _analyze(name, **kw):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return analyze(p, **kw)


@pytest.fixture(scope="module")
def in_process():
    """Every example analysed twice in this process, and the SIGALRM state around it."""
    handler, timer = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    first = {n: digest(_analyze(n)) for n in EXAMPLES}
    second = {n: digest(_analyze(n)) for n in EXAMPLES}
    return first, second, (handler, timer), (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL))


@pytest.mark.slow  # analyzes every example: minutes on 2 cores
def test_every_example_gives_the_same_result_twice_in_one_process(in_process):
    first, second, _, _ = in_process
    for name in EXAMPLES:
        assert first[name] == second[name], name


@pytest.mark.slow
def test_a_fresh_process_gives_the_same_results_as_a_warm_one(in_process, tmp_path):
    """Cold sympy caches (a new process) and warm ones give identical methods and bounds."""
    first, _, _, _ = in_process
    # cwd: from a checkout's root, `python -c` would import the source folder meshplan/ (which
    # lacks the mapped layer packages) instead of the installed package
    out = subprocess.run([sys.executable, "-c", _DIGEST % str(EX), *EXAMPLES], capture_output=True, text=True,
                         timeout=600, check=True, cwd=tmp_path)
    cold = json.loads(out.stdout)
    for name in EXAMPLES:
        assert cold[name] == first[name], name


@pytest.mark.slow
def test_analysis_installs_no_sigalrm_handler_and_arms_no_timer(in_process):
    _, _, before, after = in_process
    assert after[0] is before[0]
    assert after[1] == before[1] == (0.0, 0.0)


@pytest.mark.parametrize("name", ["stencil_5_1", "jacobi_2d", "correlation"])
def test_off_the_main_thread_the_kkt_route_gives_the_same_result(name):
    """No timer is needed, so a worker thread gets the same (KKT) answer as the main thread (every subgraph
    derived: screening may leave the KKT subgraph underived)."""
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", _analyze(name, screen=False)))
    th.start()
    th.join(timeout=300)
    assert digest(box["r"]) == digest(_analyze(name, screen=False))
    assert any(it.method == "kkt" for it in box["r"].subgraphs)


def test_bounded_solver_eliminates_splits_and_solves_quadratics():
    i, j, t = sp.symbols("D_i D_j D_t", positive=True)
    # seidel-like interior system: (i - j)(t - 1) = 0, (i - 2)(i - 2t) = 0 after i = j, F = X
    eqs = [(i - j) * (t - 1), i ** 2 - 2 * i - 2 * i * t + 4 * t, i * j + 4 * i * t - 4 * i - 4 * t + 4 - X]
    sols = solve_bounded(eqs, [i, j, t])
    for sol in sols:
        for e in eqs:
            assert sp.simplify(e.subs(sol)) == 0
    ts = [sol[t] for sol in sols]
    assert len(sols) == 4
    for expected in (sp.Integer(1), X / 4, sp.Rational(1, 2) + sp.sqrt(3 * (X - 1)) / 6,
                     sp.Rational(1, 2) - sp.sqrt(3 * (X - 1)) / 6):
        assert any(sp.simplify(v - expected) == 0 for v in ts), expected


def test_bounded_solver_gives_up_on_a_generic_cubic_instead_of_running_long():
    a, b, c = sp.symbols("D_a D_b D_c", positive=True)
    # sympy.solve runs for minutes on this (a cubic with the parameter X); the bounded solver declines at once
    with pytest.raises(Unsolved):
        solve_bounded([a - 2 * b + 1, b - 3 * c + 2, a * b * c + 2 * c + 7 * a - X], [a, b, c])


def test_bounded_solver_drops_positive_dimensional_solutions():
    a, b = sp.symbols("D_a D_b", positive=True)
    assert solve_bounded([a - b], [a, b]) == []
