"""meshplan.models.soap"""
