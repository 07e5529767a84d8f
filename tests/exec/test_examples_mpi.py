"""Every script of examples/mpi (docs/library.md) runs and verifies itself against numpy on 2, 4 and 8 ranks:
one ``mpiexec`` per rank count runs them all (tests/exec/mpi_scripts/run_examples.py calls each script's
``main(comm)``, what ``mpiexec -n K python examples/mpi/NAME.py`` runs).  A script that finds a wrong result
raises, which aborts the job and fails the test; each prints one line saying what it verified."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi, run_mpi_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "mpi").glob("*.py"))
RUNNER = Path(__file__).with_name("mpi_scripts") / "run_examples.py"
LIBRARY = ROOT / "docs" / "library.md"

pytestmark = pytest.mark.mpi


def test_there_are_examples_for_every_executor():
    names = {p.stem for p in EXAMPLES}
    assert {"allreduce", "redistribute", "matmul", "matmul_scalapack", "lu", "cholesky", "halo"} <= names


@pytest.mark.parametrize("ranks", [2, 4, pytest.param(8, marks=pytest.mark.slow)])
def test_every_example_verifies(ranks):
    out = run_mpi_json(ranks, [str(RUNNER), *map(str, EXAMPLES)], timeout_s=900, cwd=str(ROOT))
    assert out["ranks"] == ranks
    assert set(out["examples"]) == {p.stem for p in EXAMPLES}
    for name, text in out["examples"].items():
        assert text and ("verified" in text or "skipped" in text), f"{name} printed {text!r}"
        assert "WRONG" not in text, f"{name}: {text}"
    from meshplan.exec.runtime import scalapack

    if scalapack.available()[0]:  # with ScaLAPACK installed (as in CI) pdgemm really ran beside meshplan
        assert "verified" in out["examples"]["matmul_scalapack"], out["examples"]["matmul_scalapack"]


def test_an_example_runs_standalone_as_the_docs_print_it():
    res = run_mpi(4, [str(ROOT / "examples" / "mpi" / "redistribute.py")], timeout_s=300, cwd=str(ROOT))
    assert "verified" in res.stdout, res.stdout + res.stderr


def test_docs_library_shows_each_example_as_it_runs():
    """Every ```python block of docs/library.md follows a ``<!-- examples/mpi/NAME.py -->`` marker and is a
    verbatim excerpt of that script (so the documented code is the code the tests run), and every example
    script is shown."""
    text = LIBRARY.read_text()
    blocks = re.findall(r"<!-- (examples/mpi/\w+\.py) -->\n```python\n(.*?)```", text, re.S)
    whole = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "MPI.COMM_WORLD" in b]
    assert len(blocks) + len(whole) == text.count("```python")  # whole programs run as printed, below
    for path, code in blocks:
        source = (ROOT / path).read_text()
        assert code in source, f"docs/library.md shows code that is not in {path}:\n{code}"
    assert {Path(p).stem for p, _ in blocks} >= {p.stem for p in EXAMPLES} - {"cholesky"}


def test_the_readme_links_the_library_page_and_the_examples():
    readme = (ROOT / "README.md").read_text()
    assert "docs/library.md" in readme
    for p in EXAMPLES:
        assert f"examples/mpi/{p.name}" in readme or f"examples/mpi/{p.name}" in LIBRARY.read_text()


def test_the_mpi_code_of_the_docs_runs_as_printed():
    """The whole MPI programs of docs/library.md, and the "In your MPI program" blocks of docs/matmul.md and
    docs/factor.md, run on 4 ranks as printed."""
    pages = [LIBRARY, ROOT / "docs" / "matmul.md", ROOT / "docs" / "factor.md"]
    out = run_mpi_json(4, [str(RUNNER.with_name("run_snippets.py")), *map(str, pages)], timeout_s=600)
    assert len(out["blocks"]) >= 3
    assert {b.split(":")[0] for b in out["blocks"]} == {"library.md", "matmul.md", "factor.md"}
