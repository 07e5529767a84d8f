"""meshplan.exec.runtime — the one MPI runtime every capability's ``exec/<capability>/`` runs on.

Outside MPI: :mod:`.launch` (``run_job``: job file → ``mpiexec`` → rank 0's JSON;
process-group lifecycle, signal forwarding, the ``--np`` limit).  Inside a rank:
:mod:`.rank` (``rank_main(handler)``, ``RankContext``), :mod:`.guard`
(``abort_on_error``), :mod:`.comms` (``SubComms``, ``CountingComm``,
``ByteCounter``), :mod:`.shm` (``NodeStaging``: node-local shared staging
memory), :mod:`.data` (seeded data, block helpers), :mod:`.verify`
(``Verification``), :mod:`.timing` (warm-up, repeats, slowest rank).
See docs/runtime.md.  Only :mod:`.launch` is importable without mpi4py's MPI
initialisation; the rank-side modules import ``mpi4py.MPI``.
"""
