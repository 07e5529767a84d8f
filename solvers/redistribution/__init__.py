"""meshplan.solvers.redistribution"""
