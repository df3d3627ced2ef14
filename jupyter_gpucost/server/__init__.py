"""What the Jupyter server runs: the ``GpuCost`` extension, its sampler and ledger, budgets,
exports and routes. It never imports :mod:`jupyter_gpucost.kernel`: it meets its kernels
only through :mod:`jupyter_gpucost.core.protocol` and the REST API."""
