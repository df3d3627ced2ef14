"""Pure code both processes share: billing, money, the price catalog, the meter, right-sizing,
and the kernel ↔ server contract. No I/O of its own, no tornado, no IPython; it imports
nothing of :mod:`jupyter_gpucost.server` or :mod:`jupyter_gpucost.kernel`."""
