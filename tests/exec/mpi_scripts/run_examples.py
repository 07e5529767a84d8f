"""Run examples/mpi scripts in one MPI job: ``mpiexec -n K python run_examples.py EXAMPLE.py …``.

Each example is imported from its file and its ``main(comm)`` called on ``COMM_WORLD``, in the order given,
exactly as ``mpiexec -n K python EXAMPLE.py`` would (its ``__main__`` block calls the same function).  What
each example prints on rank 0 is captured; a failing example aborts the whole job (the runtime's guard), so the
test sees one error with the ranks' stderr.  Rank 0 prints ``{"ranks", "examples": {name: printed text}}``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

from mpi4py import MPI

from meshplan.exec.runtime.guard import abort_on_error


def main(paths: list[str]) -> None:
    comm = MPI.COMM_WORLD
    printed = {}
    with abort_on_error(comm):
        for path in paths:
            name = Path(path).stem
            spec = importlib.util.spec_from_file_location(f"example_{name}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                module.main(comm)
            comm.Barrier()
            printed[name] = buf.getvalue().strip()
    if comm.Get_rank() == 0:
        sys.stdout.write(json.dumps({"ranks": comm.Get_size(), "examples": printed}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
