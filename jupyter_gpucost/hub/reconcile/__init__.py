"""The hub's reconciliation with the cloud's FOCUS bill (docs/reconcile.md, "Reconciling
the hub"): each node's ``providerID`` as the bill names its instance (:mod:`.nodes`), the
bill's cost of each node allocated per day to the users whose sessions ran on it, by their
share of the node's GPUs × time, and the rest shown as unallocated (:mod:`.allocate`,
pure), and ``python -m jupyter_gpucost.hub reconcile`` (:mod:`.command`).

May import: the hub's core types and rules, :mod:`..ledger`, ``jupyter_gpucost.core`` and
``jupyter_gpucost.reconcile.read`` (the one reader of FOCUS files); never :mod:`..service`,
:mod:`..web` or the app.
"""
