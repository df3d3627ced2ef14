"""Reconciling the ledger with the bill the cloud exports as FOCUS (``jupyter gpucost
reconcile``, docs/reconcile.md): reading the export (``read``, pyarrow and fsspec, the
``reconcile`` extra), matching its rows to the machines the ledger recorded and keeping the
result in the ledger (``match``), the command line (``cli``); and the ledger written as a
FOCUS 1.2 dataset for FinOps tools (``export``, ``jupyter gpucost export-focus``) by the one
FOCUS writer (``focus_writer``) that the hub's export uses too.

May import: ``jupyter_gpucost.core`` and ``jupyter_gpucost.server.ledger``; ``command`` and
``focus_writer`` import only ``jupyter_gpucost.core`` (the hub imports them).
"""
