"""meshplan.exec.redistribution"""
