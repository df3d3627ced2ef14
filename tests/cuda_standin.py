"""A stand-in for the CUDA driver in a kernel's process (there is no GPU here).

Imported *inside* a real kernel by the container tests. What a real process does and this
copies: once the notebook has a CUDA context on a GPU, NVML lists the process (by its host
pid) with the memory of its context; an allocation in that context adds exactly its size
to that memory, and freeing it takes it away (``tests/data/h100``: NVML's per-process memory
moves in whole MiB; a 4 MiB-multiple allocation is whole 2 MiB pages). The process's
memory is written to a file named by its pid in ``state_dir``, which the NVML stand-in of
the server (``container_gpu.ContainerNvml``) reads, as the driver would.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path


class FakeCuda:
    """``jupyter_gpucost.kernel.gpu_identity.CudaContexts`` for one GPU."""

    def __init__(self, state_dir: str, gpu_uuid: str, context_bytes: int) -> None:
        self.path = Path(state_dir) / f"{os.getpid()}.json"
        self.gpu_uuid = gpu_uuid
        self.context_bytes = context_bytes
        self.blocks: dict[int, int] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.allocations = 0
        self._write()  # the notebook created its context: the driver lists the process

    def _write(self) -> None:
        state = {
            "gpu_uuid": self.gpu_uuid,
            "context_bytes": self.context_bytes,
            "blocks_bytes": sum(self.blocks.values()),
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.path)

    def active(self) -> list[tuple[int, str]]:
        return [(0, self.gpu_uuid)]

    def allocate(self, ordinal: int, size_bytes: int) -> object:
        with self._lock:
            block = self._next
            self._next += 1
            self.blocks[block] = size_bytes
            self.allocations += 1
            self._write()
            return block

    def free(self, ordinal: int, block: object) -> None:
        with self._lock:
            assert isinstance(block, int)
            self.blocks.pop(block, None)
            self._write()
