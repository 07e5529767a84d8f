"""meshplan.solvers.soap"""
