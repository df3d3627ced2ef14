"""Who used the GPUs: each interval's used GPU time, split among kernels.

For every sample and GPU, the *used* time the meter counted since the last sample is split
among the processes NVML lists on that GPU — by their SM utilisation when the driver has a
per-process sample for each of them (``nvmlDeviceGetProcessUtilization``), else by their
share of the GPU's memory when every process reports it, else evenly — and each process's
part goes to the kernel whose process tree holds it; a process of no kernel is
``unattributed``. Time is integer microseconds, split by largest remainder, so the parts
add up exactly.

Money follows the meter: a GPU's used micro-dollars are split in proportion to those
microseconds (largest remainder again), its idle micro-dollars are ``idle``, and its
unobserved time and billing adjustment (minimum charge, rounding) belong to no kernel, so
they are ``unattributed``. Hence, exactly::

    sum(kernel costs) + unattributed + idle == GPU cost of the session

NVML reports host pids. When none of the pids it lists exist in this server's pid
namespace (a container), nothing is attributed and the answer says so. With simulated
telemetry the trace's processes are given to the oldest local kernel, and the answer says
that too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import psutil

from ..core.meter import MeterSnapshot, apportion
from ..telemetry.base import ProcessReading
from .kernel_procs import KernelInfo

NOTE_CONTAINER = (
    "The GPU driver lists processes that do not exist in this server's process namespace "
    "(the server runs in a container, and NVML reports host pids): GPU use is not "
    "attributed to kernels; it is counted as not attributed."
)
NOTE_SIMULATED = (
    "Simulated telemetry: the recorded session's GPU processes are attributed to the "
    "oldest running kernel."
)


def split(total: int, weights: Sequence[int]) -> list[int]:
    """Split an integer in proportion to integer weights; the parts add up to ``total``."""
    if not weights:
        return []
    weight_sum = sum(weights)
    if weight_sum <= 0:
        weights = [1] * len(weights)
        weight_sum = len(weights)
    return apportion([Fraction(total * w, weight_sum) for w in weights])


@dataclass
class KernelAccount:
    info: KernelInfo
    #: GPU index -> used microseconds attributed to this kernel
    used_us: dict[int, int] = field(default_factory=dict)
    #: GPU index -> share of that GPU's used time in the last sample (0-1)
    share: dict[int, float] = field(default_factory=dict)
    memory_bytes: int | None = None
    ended: bool = False


@dataclass(frozen=True)
class KernelCost:
    info: KernelInfo
    ended: bool
    cost_micro_usd: int
    share: Mapping[int, float]
    memory_bytes: int | None


@dataclass(frozen=True)
class Attribution:
    """Kernels' costs, consistent with one meter snapshot."""

    snapshot: MeterSnapshot
    kernels: tuple[KernelCost, ...]
    unattributed_micro_usd: int
    idle_micro_usd: int
    pids_visible: bool
    note: str | None

    @property
    def total_micro_usd(self) -> int:
        return self.snapshot.gpu_cost_micro_usd


class Attributor:
    """Fed by the sampler thread after each sample; read by request handlers."""

    def __init__(self, *, simulated: bool = False) -> None:
        self.simulated = simulated
        self._lock = threading.Lock()
        self._accounts: dict[str, KernelAccount] = {}
        self._unattributed_us: dict[int, int] = {}
        self._last_used_us: dict[int, int] = {}
        self._pids_visible = True
        self._latest: Attribution | None = None

    def update(
        self,
        snapshot: MeterSnapshot,
        kernels: Mapping[str, KernelInfo],
        trees: Mapping[str, frozenset[int]],
    ) -> Attribution:
        # kernels come and go; an ended kernel keeps what it cost
        for kernel_id, info in kernels.items():
            account = self._accounts.get(kernel_id)
            if account is None:
                self._accounts[kernel_id] = KernelAccount(info)
            else:
                account.info = info
                account.ended = False
        for kernel_id, account in self._accounts.items():
            if kernel_id not in kernels:
                account.ended = True
                account.share = {}
        owner = self._owners(kernels, trees)
        listed = [p.pid for g in snapshot.gpus if g.reading for p in g.reading.processes or ()]
        if self.simulated:
            visible = True
        elif listed:
            visible = any(psutil.pid_exists(pid) for pid in set(listed))
        else:
            visible = self._pids_visible
        self._pids_visible = visible

        for gpu in snapshot.gpus:
            previous = self._last_used_us.get(gpu.index, 0)
            delta = max(gpu.used_us - previous, 0)
            self._last_used_us[gpu.index] = gpu.used_us
            processes = list(gpu.reading.processes or ()) if gpu.reading else []
            for account in self._accounts.values():
                account.share.pop(gpu.index, None)
            if not processes or not visible:
                self._unattributed_us[gpu.index] = self._unattributed_us.get(gpu.index, 0) + delta
                continue
            weights = self._weights(processes)
            parts = split(delta, weights)
            weight_sum = sum(weights)
            for process, part, weight in zip(processes, parts, weights, strict=True):
                owner_id = owner(process.pid)
                if owner_id is None:
                    self._unattributed_us[gpu.index] = (
                        self._unattributed_us.get(gpu.index, 0) + part
                    )
                    continue
                account = self._accounts[owner_id]
                account.used_us[gpu.index] = account.used_us.get(gpu.index, 0) + part
                account.share[gpu.index] = account.share.get(gpu.index, 0.0) + weight / weight_sum
            for account in self._accounts.values():
                held = [
                    p.used_memory_bytes or 0 for p in processes if owner(p.pid) == account.info.id
                ]
                if held:
                    account.memory_bytes = sum(held)
        result = self._price(snapshot, visible)
        with self._lock:
            self._latest = result
        return result

    @staticmethod
    def _weights(processes: Sequence[ProcessReading]) -> list[int]:
        """Per-process utilisation where NVML has it, else memory share, else even."""
        sm = [p.sm_utilization_pct for p in processes]
        if all(v is not None for v in sm) and sum(v or 0.0 for v in sm) > 0:
            return [round((v or 0.0) * 1000) for v in sm]
        memory = [p.used_memory_bytes for p in processes]
        if all(m is not None and m > 0 for m in memory):
            return [int(m or 0) for m in memory]
        return [1] * len(processes)

    def _owners(
        self, kernels: Mapping[str, KernelInfo], trees: Mapping[str, frozenset[int]]
    ) -> Callable[[int], str | None]:
        by_pid = {pid: kernel_id for kernel_id, pids in trees.items() for pid in pids}
        if self.simulated:
            live = sorted(
                (k for k in kernels.values() if k.pid is not None),
                key=lambda k: (k.started.timestamp() if k.started else 0.0, k.id),
            )
            oldest = live[0].id if live else None
            return lambda pid: by_pid.get(pid, oldest)
        return by_pid.get

    def _price(self, snapshot: MeterSnapshot, visible: bool) -> Attribution:
        accounts = sorted(self._accounts.values(), key=lambda a: a.info.id)
        kernel_micro = [0] * len(accounts)
        unattributed = 0
        idle = 0
        for gpu in snapshot.gpus:
            idle += gpu.idle_micro_usd
            unattributed += gpu.unobserved_micro_usd + gpu.adjustment_micro_usd
            parts_us = [a.used_us.get(gpu.index, 0) for a in accounts]
            rest_us = self._unattributed_us.get(gpu.index, 0)
            if sum(parts_us) + rest_us != gpu.used_us:
                # a GPU this attributor has not followed from the start: leave it unsplit
                unattributed += gpu.used_micro_usd
                continue
            money = split(gpu.used_micro_usd, [*parts_us, rest_us])
            for i, amount in enumerate(money[:-1]):
                kernel_micro[i] += amount
            unattributed += money[-1]
        kernels = tuple(
            KernelCost(
                info=a.info,
                ended=a.ended,
                cost_micro_usd=kernel_micro[i],
                share=dict(a.share),
                memory_bytes=a.memory_bytes,
            )
            for i, a in enumerate(accounts)
        )
        if self.simulated:
            note: str | None = NOTE_SIMULATED
        elif not visible:
            note = NOTE_CONTAINER
        else:
            note = None
        return Attribution(
            snapshot=snapshot,
            kernels=kernels,
            unattributed_micro_usd=unattributed,
            idle_micro_usd=idle,
            pids_visible=visible,
            note=note,
        )

    @property
    def latest(self) -> Attribution | None:
        with self._lock:
            return self._latest
