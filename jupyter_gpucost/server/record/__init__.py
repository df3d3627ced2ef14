"""What the session keeps of itself: after every sample, the history ring, the
attribution, the Prometheus metrics and the ledger's buffer; the history windows read
back; the cells' costs the kernels report.

* :mod:`.recorder`: what happens after every sample (and the flusher thread);
* :mod:`.history`: the one-second ring and the windows read from it or the ledger;
* :mod:`.metrics`: the Prometheus metrics;
* :mod:`.cells`: the cell records kernels post, checked.

May import: the server's base (:mod:`..errors`, :mod:`..inputs`, :mod:`..sampler`, ...),
:mod:`..ledger`, :mod:`..gpu_use`, ``jupyter_gpucost.core`` and ``.telemetry``; never the
service, the budget, the exports, the handlers or the app.
"""
