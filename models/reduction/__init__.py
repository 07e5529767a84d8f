"""meshplan.models.reduction"""
