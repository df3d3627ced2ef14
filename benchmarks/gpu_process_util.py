"""Per-process SM utilisation from NVML while this process multiplies matrices (GPU machine).

PYTHONPATH=. python3 benchmarks/gpu_process_util.py
"""

from __future__ import annotations

import threading
import time

import torch

from jupyter_gpucost.telemetry.nvml import NvmlSource

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
stop = threading.Event()


def work() -> None:
    while not stop.is_set():
        a @ a
        torch.cuda.synchronize()


worker = threading.Thread(target=work)
worker.start()
source = NvmlSource()
source.open()
for _ in range(4):
    time.sleep(1)
    (reading,) = source.read()
    processes = [
        (p.pid, p.used_memory_bytes, p.sm_utilization_pct) for p in reading.processes or ()
    ]
    print("utilization_pct", reading.utilization_pct, "processes", processes, reading.unavailable)
stop.set()
worker.join()
