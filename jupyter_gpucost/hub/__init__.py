"""The hub tier: a JupyterHub service that owns the hub's ledger, bills each server from
what the hub allocated, and enforces per-user and per-group budgets from outside the
users' servers (``python -m jupyter_gpucost.hub``).
"""
