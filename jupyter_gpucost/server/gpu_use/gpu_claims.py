"""Which of NVML's processes is which kernel's, when NVML's pids are not this server's.

Inside a container the NVIDIA driver may list *host* pids (NVIDIA's answers on
nvidia-docker #179 and #1483; the 580 driver measured on an H200 answered in the caller's
PID namespace instead, and then no probe is needed), so a kernel's pid, as the server
knows it, is never among them. Nor can a kernel learn its host pid from inside (``/proc`` shows
the container's namespace only). What both sides can see is GPU memory: NVML reports each
process's ``usedGpuMemory``, and a kernel that already has a CUDA context can change its own
by an amount the server chooses.

A probe, observed by the server and never taken on a kernel's word:

1. ``start``: a kernel asks to be identified on one GPU (by UUID) and proves that it is the
   kernel it names (an HMAC of the request with that kernel's own connection key, which
   only the kernel and this server hold). The server answers a probe id (a secret), a
   size, random among :data:`SIZE_CHOICES` and different from any other open probe's on
   that GPU, and ``hold_s`` (how often to ask). The second reading after the start is the
   baseline: each listed process's memory before the kernel allocates (it waits until
   the probe says ``baseline_read``).
2. ``held``: the kernel has allocated exactly that size in its own context (refused before
   the baseline was read), and waits until the probe counts a ``held_readings``. Each
   reading from the second after ``held`` on
   the sampler takes from then on is looked at: the processes whose memory rose by the
   size (within :data:`TOLERANCE_BYTES`) since the baseline are the candidates.
3. ``release``: the kernel frees it (after this answer). A reading then shows the one
   candidate's memory fall back by the size: the probe is ``mapped`` and that host pid is
   the kernel's on that GPU. Anything else (no candidate, or several) ends the probe as
   ``ambiguous``, and the kernel may try again later.

A host pid already mapped to another kernel stays that kernel's, and a kernel with a
mapped process on a GPU gets no second one there (both ``taken``). A mapping ends when its
pid leaves the GPU's process list or its kernel ends. The pid is never sent
by a kernel: a kernel can only make its *own* process's memory move, so it can only ever be
mapped to its own process (a process of another kernel or another tenant cannot be given
to it, nor taken from its owner). Children a kernel starts (``torchrun``, DataLoader
workers) hold contexts of their own and are not probed: they stay unmapped, counted as not
from these kernels.

Tornado-free; the sampler thread calls :meth:`ClaimBook.observe`, the handlers the rest.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Literal

from ...core.i18n import N_, _
from ...core.meter import MeterSnapshot
from ...core.protocol import gpu_probe_signature
from ...core.refusal import Refusal

MiB = 1024**2
#: the sizes a probe may ask for: 8 MiB to 260 MiB in steps of 4 MiB (NVML reports
#: process memory in whole MiB; a CUDA allocation this large is made of 2 MiB pages),
#: small beside what a notebook holds, so that the probe never starves it
SIZE_CHOICES = tuple(8 * MiB + 4 * MiB * k for k in range(64))
#: how far a process's memory may differ from baseline + size (page rounding)
TOLERANCE_BYTES = 2 * MiB
#: open probes at most, in all (a kernel has one per GPU at a time)
MAX_OPEN = 64
#: how long a probe may stay open, in sampler readings beyond its hold
EXPIRY_READINGS = 20
MIN_EXPIRY_S = 10.0

ProbeState = Literal[
    "armed", "held", "released", "mapped", "ambiguous", "taken", "expired", "visible"
]
OPEN_STATES = ("armed", "held", "released")

#: why a probe was refused (sent to the kernel, translated by the handler)
MSG_UNKNOWN_KERNEL = N_("No running kernel of this server has that id.")
MSG_BAD_SIGNATURE = N_("The request is not signed with that kernel's connection key.")
MSG_UNKNOWN_GPU = N_("This server reads no GPU with that UUID.")
MSG_UNKNOWN_PROBE = N_("No such GPU probe (it ended, or was never started).")
MSG_PROBE_OPEN = N_("This kernel is already being identified on that GPU.")
MSG_TOO_MANY = N_("Too many GPU probes are open; try again later.")
MSG_WRONG_STEP = N_("This GPU probe is not at that step.")


@dataclass
class Probe:
    id: str
    kernel_id: str
    gpu_uuid: str
    size_bytes: int
    started_reading: int
    deadline_s: float
    state: ProbeState = "armed"
    held_after: int | None = None
    released_after: int | None = None
    #: candidates' memory in the last reading of the held window
    held_memory: dict[int, int] = field(default_factory=dict)
    #: readings taken wholly while the kernel held its block
    held_readings: int = 0
    host_pid: int | None = None
    #: host pid -> used memory before the kernel allocated (the baseline reading)
    baseline: dict[int, int] | None = None


def memory_by_pid(snapshot: MeterSnapshot, gpu_uuid: str) -> dict[int, int] | None:
    """Each listed process's used memory on one GPU, or None (no such GPU, no list)."""
    for gpu in snapshot.gpus:
        if gpu.uuid != gpu_uuid or gpu.reading is None:
            continue
        if gpu.reading.processes is None:
            return None
        return {
            p.pid: p.used_memory_bytes
            for p in gpu.reading.processes
            if p.used_memory_bytes is not None
        }
    return None


def rose_by(before: int, after: int, size: int) -> bool:
    return size <= after - before <= size + TOLERANCE_BYTES


class ClaimBook:
    """Open probes and the mappings they made (host pid -> kernel, per GPU)."""

    def __init__(
        self,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        choose: Callable[[tuple[int, ...]], int] = secrets.choice,
    ) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._choose = choose
        self._lock = threading.Lock()
        self._probes: dict[str, Probe] = {}
        #: (GPU UUID, host pid) -> kernel id
        self._claims: dict[tuple[str, int], str] = {}
        self._reading = 0
        self._latest: MeterSnapshot | None = None

    @property
    def hold_s(self) -> float:
        """How long a kernel holds its allocation: at least two readings."""
        return round(self._interval_s * 2.5 + 0.1, 3)

    # -- the handlers' side --------------------------------------------------------------

    def start(
        self,
        kernel_id: str,
        gpu_uuid: str,
        signature: str,
        key: bytes | None,
        local_pids: frozenset[int] = frozenset(),
    ) -> Probe:
        """Open a probe for a kernel that proved who it is (``key``: its connection key,
        None when no running kernel has that id).

        Where NVML already lists a process of the kernel's tree as the server sees it
        (``local_pids``: no container between them), no probe is needed: the answer is a
        probe already ended, ``visible``, and the kernel allocates nothing."""
        if key is None:
            raise Refusal(_(MSG_UNKNOWN_KERNEL), HTTPStatus.NOT_FOUND)
        if not key or not hmac.compare_digest(
            gpu_probe_signature(key, kernel_id, gpu_uuid).encode(), signature.encode()
        ):
            raise Refusal(_(MSG_BAD_SIGNATURE), HTTPStatus.FORBIDDEN)
        with self._lock:
            snapshot = self._latest
            listed = None if snapshot is None else memory_by_pid(snapshot, gpu_uuid)
            if listed is None:
                raise Refusal(_(MSG_UNKNOWN_GPU), HTTPStatus.NOT_FOUND)
            if local_pids & listed.keys():
                return Probe(
                    id=secrets.token_urlsafe(16),
                    kernel_id=kernel_id,
                    gpu_uuid=gpu_uuid,
                    size_bytes=0,
                    started_reading=self._reading,
                    deadline_s=self._clock(),
                    state="visible",
                )
            self._expire()
            open_ = [p for p in self._probes.values() if p.state in OPEN_STATES]
            if any(p.kernel_id == kernel_id and p.gpu_uuid == gpu_uuid for p in open_):
                raise Refusal(_(MSG_PROBE_OPEN), HTTPStatus.CONFLICT)
            if len(open_) >= MAX_OPEN:
                raise Refusal(_(MSG_TOO_MANY), 429)
            taken = {p.size_bytes for p in open_ if p.gpu_uuid == gpu_uuid}
            free = tuple(s for s in SIZE_CHOICES if s not in taken)
            probe = Probe(
                id=secrets.token_urlsafe(16),
                kernel_id=kernel_id,
                gpu_uuid=gpu_uuid,
                size_bytes=self._choose(free),
                started_reading=self._reading,
                deadline_s=self._clock()
                + max(MIN_EXPIRY_S, self._interval_s * EXPIRY_READINGS + self.hold_s * 2),
            )
            self._probes[probe.id] = probe
            return probe

    def step(self, probe_id: str, to: Literal["held", "released"]) -> Probe:
        """The kernel holds its allocation (``held``), or is about to free it
        (``released``)."""
        with self._lock:
            self._expire()
            probe = self._probes.get(probe_id)
            if probe is None:
                raise Refusal(_(MSG_UNKNOWN_PROBE), HTTPStatus.NOT_FOUND)
            if to == "held" and probe.state == "armed" and probe.baseline is not None:
                probe.state = "held"
                probe.held_after = self._reading
            elif to == "released" and probe.state == "held":
                probe.released_after = self._reading
                if not probe.held_memory:
                    # no reading saw the allocation: nothing can be concluded
                    probe.state = "ambiguous"
                else:
                    probe.state = "released"
            else:
                raise Refusal(_(MSG_WRONG_STEP), HTTPStatus.CONFLICT)
            return probe

    def result(self, probe_id: str) -> Probe:
        with self._lock:
            self._expire()
            probe = self._probes.get(probe_id)
            if probe is None:
                raise Refusal(_(MSG_UNKNOWN_PROBE), HTTPStatus.NOT_FOUND)
            return probe

    # -- the sampler's side -------------------------------------------------------------

    def observe(self, snapshot: MeterSnapshot, live_kernels: frozenset[str]) -> None:
        """Look at a new reading: advance the probes, drop mappings that ended."""
        with self._lock:
            self._reading += 1
            self._latest = snapshot
            listed: dict[str, dict[int, int] | None] = {}
            for gpu in snapshot.gpus:
                listed[gpu.uuid] = memory_by_pid(snapshot, gpu.uuid)
            for (uuid, pid), kernel_id in list(self._claims.items()):
                memory = listed.get(uuid)
                gone = memory is not None and pid not in memory
                if kernel_id not in live_kernels or gone:
                    del self._claims[(uuid, pid)]
            for probe in self._probes.values():
                memory = listed.get(probe.gpu_uuid)
                if memory is not None:
                    self._advance(probe, memory)
            self._expire()
            # ended probes are kept a while for the kernel to read, then forgotten
            for probe_id in [
                p.id
                for p in self._probes.values()
                if p.state not in OPEN_STATES and self._reading - p.started_reading > 200
            ]:
                del self._probes[probe_id]

    def _advance(self, probe: Probe, memory: Mapping[int, int]) -> None:
        size = probe.size_bytes
        if probe.state == "armed":
            # the first reading wholly after the start (the one after may have been under
            # way when the request came): before the kernel allocates
            if probe.baseline is None and self._reading >= probe.started_reading + 2:
                probe.baseline = dict(memory)
        elif probe.state == "held" and probe.held_after is not None and probe.baseline:
            # as for the baseline: the reading after ``held`` may have been read before
            if self._reading <= probe.held_after + 1:
                return
            probe.held_readings += 1
            probe.held_memory = {
                pid: now
                for pid, now in memory.items()
                if pid in probe.baseline and rose_by(probe.baseline[pid], now, size)
            }
        elif probe.state == "released" and probe.released_after is not None:
            if len(probe.held_memory) != 1:
                probe.state = "ambiguous"
                return
            ((pid, held),) = probe.held_memory.items()
            now = memory.get(pid)
            if now is None:
                probe.state = "ambiguous"  # the process ended meanwhile
                return
            if self._reading <= probe.released_after or not rose_by(now, held, size):
                return  # not freed yet, as far as this reading shows
            owner = self._claims.get((probe.gpu_uuid, pid))
            if owner is not None and owner != probe.kernel_id:
                probe.state = "taken"
                return
            # a kernel is one process: while one of its pids on this GPU is listed, it
            # gets no second one (what a kernel holding another's key could try)
            if any(
                uuid == probe.gpu_uuid and other != pid and kernel_id == probe.kernel_id
                for (uuid, other), kernel_id in self._claims.items()
            ):
                probe.state = "taken"
                return
            self._claims[(probe.gpu_uuid, pid)] = probe.kernel_id
            probe.host_pid = pid
            probe.state = "mapped"

    def _expire(self) -> None:
        now = self._clock()
        for probe in self._probes.values():
            if probe.state in OPEN_STATES and now > probe.deadline_s:
                probe.state = "expired"

    # -- the attribution's side -----------------------------------------------------------

    def owners(self) -> dict[str, dict[int, str]]:
        """GPU UUID -> host pid -> kernel id, for every mapping in force."""
        out: dict[str, dict[int, str]] = {}
        with self._lock:
            for (uuid, pid), kernel_id in self._claims.items():
                out.setdefault(uuid, {})[pid] = kernel_id
        return out
