"""Who used the GPUs: each interval's used GPU time, split among kernels.

For every sample and GPU, the *used* time the meter counted since the last sample is split
among the processes NVML lists on that GPU, and each process's part goes to the kernel
whose process tree holds it; a process of no kernel is ``unattributed``. How an interval is
split (``docs/cost-semantics.md`` says it for users; each kernel row names it):

1. ``sm_samples``: the driver's per-process SM samples (``nvmlDeviceGetProcessUtilization``,
   collected at 4 Hz and added up over the interval). Each sample names the process that
   dominated it, so a process with no sample while another has one did not compute: it
   gets nothing. Memory never decides while samples exist.
2. ``kernel_gpu_time``: the kernels' own measured GPU busy time (their priced cells), which
   splits concurrent work better than samples that under-count a minority: used when two
   or more kernels have samples in the same interval, or when there are no samples at
   all, and every kernel concerned has measured its busy time recently.
3. ``memory``: with no samples and no measured GPU time, each process's share of memory.
4. ``even``: with none of these (or samples that are all 0 %), an even split.

Time is integer microseconds, split by largest remainder, so the parts add up exactly.

Money follows the meter: a GPU's used micro-dollars are split in proportion to those
microseconds (largest remainder again), its idle micro-dollars are ``idle``, and its
unobserved time and billing adjustment (minimum charge, rounding) belong to no kernel, so
they are ``unattributed``. Hence, exactly::

    sum(kernel costs) + unattributed + idle == GPU cost of the session

In a container NVML may report host pids (some drivers answer in the caller's PID
namespace instead: then nothing changes). When none of the pids it lists exist in this
server's pid namespace, a process is a kernel's only where the kernel identified it (a
probe the server observed, :mod:`.gpu_claims`); every other process, another tenant's or a
kernel's child, is not from these kernels and counted as not attributed. With no process
identified, nothing is attributed and the answer says so. With simulated telemetry the
trace's processes are given to the oldest local kernel, and the answer says that too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

import psutil

from ...core.i18n import N_
from ...core.meter import MeterSnapshot, apportion
from ...telemetry.base import ProcessReading
from .gpu_claims import ClaimBook
from .kernel_procs import KernelInfo

#: the notes an attribution carries, in English (the catalog's ids): the API's answers
#: translate them when they are sent
NOTE_CONTAINER = N_(
    "The GPU driver lists processes that do not exist in this server's process namespace "
    "(the server runs in a container, and NVML reports host pids): GPU use is not "
    "attributed to kernels; it is counted as not attributed."
)
NOTE_IDENTIFIED = N_(
    "The GPU driver lists host pids (the server runs in a container): a GPU process is a "
    "kernel's only where that kernel identified it; the others (other containers' "
    "processes, processes a kernel started) are not from these kernels and are counted as "
    "not attributed."
)
NOTE_SIMULATED = N_(
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


#: how a share was made (the API's ``gpu_share_by``; the panel says it in words)
BY_SM_SAMPLES = "sm_samples"
BY_KERNEL_GPU_TIME = "kernel_gpu_time"
BY_MEMORY = "memory"
BY_EVEN = "even"
SHARE_METHODS = (BY_SM_SAMPLES, BY_KERNEL_GPU_TIME, BY_MEMORY, BY_EVEN)

#: a kernel's measured GPU busy fraction is used for this long after its cell ended
KERNEL_GPU_TIME_VALID_S = 300.0


@dataclass
class KernelAccount:
    info: KernelInfo
    #: GPU index -> used microseconds attributed to this kernel
    used_us: dict[int, int] = field(default_factory=dict)
    #: GPU index -> share of that GPU's used time in the last interval it was used (0-1)
    share: dict[int, float] = field(default_factory=dict)
    #: GPU index -> how that share was made (one of :data:`SHARE_METHODS`)
    share_by: dict[int, str] = field(default_factory=dict)
    memory_bytes: int | None = None
    ended: bool = False


@dataclass(frozen=True)
class MeasuredGpuTime:
    """A kernel's own measure of its GPU use: busy seconds over a cell's wall seconds."""

    busy_fraction: float
    ended_epoch_s: float


@dataclass(frozen=True)
class KernelCost:
    info: KernelInfo
    ended: bool
    cost_micro: int
    share: Mapping[int, float]
    memory_bytes: int | None
    share_by: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OtherProcess:
    """A GPU process no kernel identified (NVML's pids are not ours): another container's,
    or a process a kernel started; counted as not attributed."""

    gpu_index: int
    host_pid: int
    memory_bytes: int | None


@dataclass(frozen=True)
class Attribution:
    """Kernels' costs, consistent with one meter snapshot."""

    snapshot: MeterSnapshot
    kernels: tuple[KernelCost, ...]
    unattributed_micro: int
    idle_micro: int
    pids_visible: bool
    note: str | None
    #: GPU index -> host pid -> kernel id: the processes kernels identified as theirs
    identified: Mapping[int, Mapping[int, str]] = field(default_factory=dict)
    #: the processes not from these kernels, where kernels identify theirs
    others: tuple[OtherProcess, ...] = ()

    @property
    def total_micro(self) -> int:
        return self.snapshot.gpu_cost_micro


def weights_of(
    processes: Sequence[ProcessReading],
    owner: Callable[[int], str | None],
    gpu_index: int,
    measured: Mapping[str, Mapping[int, float]],
) -> tuple[list[int], str]:
    """Integer weights of the processes on one GPU for one interval, and how they were made
    (the rules in this module's docstring, in that order)."""
    sampled = any(p.sm_utilization_pct is not None for p in processes)
    if sampled:
        sums = [p.sm_pct_sum for p in processes]
        if sum(sums) <= 0:
            # samples, all at 0 %: nobody dominated any of them; those sampled share evenly
            return [1 if p.sm_utilization_pct is not None else 0 for p in processes], BY_EVEN
        computing = [p for p, w in zip(processes, sums, strict=True) if w > 0]
        own = _own_gpu_time(computing, owner, gpu_index, measured)
        if own is not None and len(own) >= 2 and sum(own.values()) > 0:
            # concurrent kernels, each with its own measured GPU time: that splits better
            return _by_kernel(processes, owner, own), BY_KERNEL_GPU_TIME
        return [round(w * 1000) for w in sums], BY_SM_SAMPLES
    own = _own_gpu_time(processes, owner, gpu_index, measured)
    if own is not None and sum(own.values()) > 0:
        return _by_kernel(processes, owner, own), BY_KERNEL_GPU_TIME
    memory = [p.used_memory_bytes for p in processes]
    if all(m is not None and m > 0 for m in memory):
        return [int(m or 0) for m in memory], BY_MEMORY
    return [1] * len(processes), BY_EVEN


def _own_gpu_time(
    processes: Sequence[ProcessReading],
    owner: Callable[[int], str | None],
    gpu_index: int,
    measured: Mapping[str, Mapping[int, float]],
) -> dict[str, float] | None:
    """kernel id -> its measured busy fraction on this GPU, if every process is a kernel's
    and every such kernel has one; else ``None``."""
    own: dict[str, float] = {}
    for p in processes:
        kernel_id = owner(p.pid)
        fraction = None if kernel_id is None else measured.get(kernel_id, {}).get(gpu_index)
        if kernel_id is None or fraction is None:
            return None
        own[kernel_id] = fraction
    return own or None


def _by_kernel(
    processes: Sequence[ProcessReading],
    owner: Callable[[int], str | None],
    own: Mapping[str, float],
) -> list[int]:
    """Each kernel's weight on its first listed process (the others of its tree get 0)."""
    weights: list[int] = []
    seen: set[str] = set()
    for p in processes:
        kernel_id = owner(p.pid)
        if kernel_id is None or kernel_id not in own or kernel_id in seen:
            weights.append(0)
            continue
        seen.add(kernel_id)
        weights.append(round(own[kernel_id] * 1_000_000))
    return weights


class Attributor:
    """Fed by the sampler thread after each sample; read by request handlers."""

    def __init__(self, *, simulated: bool = False, claims: ClaimBook | None = None) -> None:
        self.simulated = simulated
        #: the kernels' identified GPU processes, where NVML's pids are not ours
        self.claims = claims
        self._lock = threading.Lock()
        self._accounts: dict[str, KernelAccount] = {}
        self._unattributed_us: dict[int, int] = {}
        self._last_used_us: dict[int, int] = {}
        self._pids_visible = True
        self._identified = False
        self._latest: Attribution | None = None
        #: kernel id -> GPU index -> its latest measured GPU busy time
        self._measured: dict[str, dict[int, MeasuredGpuTime]] = {}

    def note_gpu_time(
        self,
        kernel_id: str,
        busy_s: Mapping[int, float],
        wall_s: float,
        ended_epoch_s: float,
    ) -> None:
        """A kernel measured its own GPU busy time over a cell (a priced cell's record).

        Only *busy* time counts (the profiler's CUDA kernels), never the span between two
        CUDA events. Called from any thread.
        """
        if wall_s <= 0:
            return
        with self._lock:
            per_gpu = self._measured.setdefault(kernel_id, {})
            for index, seconds in busy_s.items():
                fraction = min(max(seconds / wall_s, 0.0), 1.0)
                per_gpu[index] = MeasuredGpuTime(fraction, ended_epoch_s)

    def _measured_now(self, now_epoch_s: float) -> dict[str, dict[int, float]]:
        with self._lock:
            return {
                kernel_id: {
                    i: m.busy_fraction
                    for i, m in per_gpu.items()
                    if now_epoch_s - m.ended_epoch_s <= KERNEL_GPU_TIME_VALID_S
                }
                for kernel_id, per_gpu in self._measured.items()
            }

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
        tree_owner = self._owners(kernels, trees)
        identified: dict[str, dict[int, str]] = {}
        if self.claims is not None and not self.simulated:
            self.claims.observe(snapshot, frozenset(kernels))
            identified = self.claims.owners()
        # a kernel identified a host pid that is not in its own tree: NVML's pids are not
        # this server's, and only what the kernels identified is theirs
        separate = any(
            pid not in trees.get(kernel_id, frozenset())
            for per_gpu in identified.values()
            for pid, kernel_id in per_gpu.items()
        )
        listed = [p.pid for g in snapshot.gpus if g.reading for p in g.reading.processes or ()]
        if self.simulated:
            visible = True
        elif separate:
            visible = False
        elif listed:
            visible = any(psutil.pid_exists(pid) for pid in set(listed))
        else:
            visible = self._pids_visible
        self._pids_visible = visible
        self._identified = separate

        measured = self._measured_now(snapshot.as_of.timestamp())
        for gpu in snapshot.gpus:
            previous = self._last_used_us.get(gpu.index, 0)
            delta = max(gpu.used_us - previous, 0)
            self._last_used_us[gpu.index] = gpu.used_us
            processes = list(gpu.reading.processes or ()) if gpu.reading else []
            owner = identified.get(gpu.uuid, {}).get if separate else tree_owner
            if not processes or not (visible or separate):
                self._unattributed_us[gpu.index] = self._unattributed_us.get(gpu.index, 0) + delta
                continue
            weights, method = weights_of(processes, owner, gpu.index, measured)
            parts = split(delta, weights)
            weight_sum = sum(weights) or 1
            if delta > 0:  # the shares shown are those of the last interval with GPU use
                for account in self._accounts.values():
                    account.share.pop(gpu.index, None)
                    account.share_by.pop(gpu.index, None)
            for process, part, weight in zip(processes, parts, weights, strict=True):
                owner_id = owner(process.pid)
                if owner_id is None:
                    self._unattributed_us[gpu.index] = (
                        self._unattributed_us.get(gpu.index, 0) + part
                    )
                    continue
                account = self._accounts[owner_id]
                account.used_us[gpu.index] = account.used_us.get(gpu.index, 0) + part
                if delta > 0:
                    account.share[gpu.index] = (
                        account.share.get(gpu.index, 0.0) + weight / weight_sum
                    )
                    account.share_by[gpu.index] = method
            for account in self._accounts.values():
                held = [
                    p.used_memory_bytes or 0 for p in processes if owner(p.pid) == account.info.id
                ]
                if held:
                    account.memory_bytes = sum(held)
        result = self._price(snapshot, visible)
        if separate:
            by_index = {gpu.index: dict(identified.get(gpu.uuid, {})) for gpu in snapshot.gpus}
            others = tuple(
                OtherProcess(gpu.index, p.pid, p.used_memory_bytes)
                for gpu in snapshot.gpus
                if gpu.reading
                for p in gpu.reading.processes or ()
                if p.pid not in by_index.get(gpu.index, {})
            )
            result = replace(result, identified=by_index, others=others)
        with self._lock:
            self._latest = result
        return result

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
            idle += gpu.idle_micro
            unattributed += gpu.unobserved_micro + gpu.adjustment_micro
            parts_us = [a.used_us.get(gpu.index, 0) for a in accounts]
            rest_us = self._unattributed_us.get(gpu.index, 0)
            if sum(parts_us) + rest_us != gpu.used_us:
                # a GPU this attributor has not followed from the start: leave it unsplit
                unattributed += gpu.used_micro
                continue
            money = split(gpu.used_micro, [*parts_us, rest_us])
            for i, amount in enumerate(money[:-1]):
                kernel_micro[i] += amount
            unattributed += money[-1]
        kernels = tuple(
            KernelCost(
                info=a.info,
                ended=a.ended,
                cost_micro=kernel_micro[i],
                share=dict(a.share),
                memory_bytes=a.memory_bytes,
                share_by=dict(a.share_by),
            )
            for i, a in enumerate(accounts)
        )
        if self.simulated:
            note: str | None = NOTE_SIMULATED
        elif self._identified:
            note = NOTE_IDENTIFIED
        elif not visible:
            note = NOTE_CONTAINER
        else:
            note = None
        return Attribution(
            snapshot=snapshot,
            kernels=kernels,
            unattributed_micro=unattributed,
            idle_micro=idle,
            pids_visible=visible,
            note=note,
        )

    @property
    def latest(self) -> Attribution | None:
        with self._lock:
            return self._latest
