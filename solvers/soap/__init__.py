"""SOAP I/O lower bounds (thesis chapter 5): χ(X), X0, ρ, Theorem 5.1, integer tiles."""
