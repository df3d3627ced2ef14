"""Where GPU readings come from: NVML, a replayed trace, or none (:mod:`.base` has the types)."""
