"""Pure code both processes share: billing, money, the price catalog, a GPU reading's shape,
the meter, right-sizing, and the kernel ↔ server contract. No I/O of its own, no tornado, no
IPython; it imports nothing of the package above it (telemetry, server, kernel, hub)."""
