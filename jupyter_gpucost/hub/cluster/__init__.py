"""The cluster: GPU use from its Prometheus (what dcgm-exporter saw), its settings, and
the used/idle split of each server's allocation.

May import: the hub's core types and rules, :mod:`..ledger`, :mod:`..profiles` (pod names)
and ``jupyter_gpucost.core``; never :mod:`..idle`, :mod:`..service`, :mod:`..web` or the app.
"""
