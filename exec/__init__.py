"""meshplan.exec — lowering plans to mpi4py programs and running them.

The only layer that imports mpi4py.  ``launch.py`` starts ``mpiexec`` (from the
``mpich`` wheel) as a subprocess with a timeout.
"""
