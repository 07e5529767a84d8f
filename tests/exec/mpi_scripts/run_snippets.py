"""Run the MPI code blocks of docs pages as printed: ``mpiexec -n K python run_snippets.py DOC.md …``.

Every ```python block of a page that uses ``MPI.COMM_WORLD`` runs in a fresh namespace, in order, on every
rank (what ``mpiexec -n K python block.py`` runs); a failing block aborts the job.  Rank 0 prints
``{"blocks": ["page:line", …]}``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from mpi4py import MPI

from meshplan.exec.runtime.guard import abort_on_error


def blocks(page: Path):
    text = page.read_text()
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        if "MPI.COMM_WORLD" in m.group(1):
            yield f"{page.name}:{text[: m.start(1)].count(chr(10)) + 1}", m.group(1)


def main(pages: list[str]) -> None:
    comm, ran = MPI.COMM_WORLD, []
    with abort_on_error(comm):
        for page in pages:
            for name, code in blocks(Path(page)):
                exec(compile(code, name, "exec"), {"__name__": "__main__"})  # noqa: S102 - the docs, as printed
                comm.Barrier()
                ran.append(name)
    if comm.Get_rank() == 0:
        sys.stdout.write(json.dumps({"blocks": ran}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
