"""meshplan.models.redistribution"""
