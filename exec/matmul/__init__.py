"""meshplan.exec.matmul — the COSMA schedule in the caller's MPI program (MatmulExecutor), and its verification runs
next to the 2-D SUMMA and ScaLAPACK pdgemm baselines."""
