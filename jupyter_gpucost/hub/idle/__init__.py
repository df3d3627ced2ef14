"""Idle GPU servers: the idle policy and its settings, the servers' reports read as GPU
activity, and the reclaimer (warn, then stop).

May import: the hub's core types and rules, :mod:`..ledger`, :mod:`..profiles`,
:mod:`..cluster` and ``jupyter_gpucost.core``; never :mod:`..service`, :mod:`..web` or the
app.
"""
