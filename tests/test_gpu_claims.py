"""Kernels identify their own GPU process where NVML lists host pids (a container): the
server maps a host pid to a kernel only from what it saw itself, the memory of exactly one
process rising and falling by the size it chose; a kernel's word moves nothing."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http import HTTPStatus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter, MeterSnapshot
from jupyter_gpucost.core.protocol import gpu_probe_signature
from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.server.gpu_use.attribution import NOTE_CONTAINER, NOTE_IDENTIFIED, Attributor
from jupyter_gpucost.server.gpu_use.gpu_claims import SIZE_CHOICES, ClaimBook, MiB
from jupyter_gpucost.server.gpu_use.kernel_procs import KernelInfo
from jupyter_gpucost.telemetry.base import GpuReading, ProcessReading


def refused(status: HTTPStatus) -> pytest.RaisesExc[Refusal]:
    """``pytest.raises`` for a :class:`Refusal` of this status (403, 404, 409)."""
    return pytest.raises(Refusal, check=lambda e: e.status == status)


CATALOG = load_catalog()
T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
UUID = "GPU-b2e7d1a4-6c39-4f80-a2d5-91e3c07b6d48"
#: the container's pids (the server's) and the host's, as NVML lists them
OFFSET = 3_000_000
KEYS = {"victim": b"victim-connection-key", "mallory": b"mallory-connection-key"}
PIDS = {"victim": 101, "mallory": 202}
FOREIGN = 4_100_777  # another container's process on the same GPU


def kernel(kernel_id: str) -> KernelInfo:
    return KernelInfo(kernel_id, "python3", "idle", f"{kernel_id}.ipynb", PIDS[kernel_id], T0)


KERNELS = {k: kernel(k) for k in PIDS}
TREES = {k: frozenset({pid}) for k, pid in PIDS.items()}


class Gpu:
    """One GPU as NVML would list it: host pid -> used memory."""

    def __init__(self) -> None:
        self.memory = {
            PIDS["victim"] + OFFSET: 9_229_565_952,  # the H100 recording's idle kernel
            PIDS["mallory"] + OFFSET: 1_184_890_880,  # and its busy one
            FOREIGN: 20 * 1024 * MiB,
        }
        self.meter = Meter(
            policy=PricePolicy(catalog=CATALOG),
            rule=BillingRule(1, 60),
            sample_interval_s=1.0,
            start_us=0,
            started=T0,
            base_per_hour=Decimal(0),
        )
        self.now_us = 0
        self.util = 0.0
        self.sm: dict[int, float] = {}

    def snapshot(self) -> MeterSnapshot:
        self.now_us += 1_000_000
        reading = GpuReading(
            index=0,
            uuid=UUID,
            name="NVIDIA H100 80GB HBM3",
            memory_total_bytes=85_520_809_984,
            memory_used_bytes=sum(self.memory.values()),
            utilization_pct=self.util,
            processes=tuple(
                ProcessReading(pid, mem, self.sm.get(pid), 1 if pid in self.sm else 0)
                for pid, mem in self.memory.items()
            ),
        )
        return self.meter.update((reading,), self.now_us, T0 + timedelta(microseconds=self.now_us))


def book_with(gpu: Gpu, choose_index: int = 0) -> ClaimBook:
    sizes = itertools.count(choose_index)
    book = ClaimBook(
        interval_s=1.0,
        clock=lambda: gpu.now_us / 1e6,
        choose=lambda free: free[next(sizes) % len(free)],
    )
    book.observe(gpu.snapshot(), frozenset(KERNELS))
    return book


def tick(book: ClaimBook, gpu: Gpu, n: int = 1) -> None:
    for _ in range(n):
        book.observe(gpu.snapshot(), frozenset(KERNELS))


def identify(book: ClaimBook, gpu: Gpu, kernel_id: str, allocating_pid: int | None = None) -> str:
    """One probe, the kernel following it honestly (its allocation lands in
    ``allocating_pid``, its own host pid unless a test says otherwise)."""
    pid = PIDS[kernel_id] + OFFSET if allocating_pid is None else allocating_pid
    key = KEYS[kernel_id]
    probe = book.start(kernel_id, UUID, gpu_probe_signature(key, kernel_id, UUID), key)
    tick(book, gpu, 2)  # the kernel waits while the server reads the baseline
    gpu.memory[pid] += probe.size_bytes
    book.step(probe.id, "held")
    tick(book, gpu, 2)
    book.step(probe.id, "released")
    gpu.memory[pid] -= probe.size_bytes
    tick(book, gpu, 2)
    return book.result(probe.id).state


def test_each_kernel_is_mapped_to_its_own_host_pid_and_others_to_nobody() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    assert identify(book, gpu, "victim") == "mapped"
    assert identify(book, gpu, "mallory") == "mapped"
    assert book.owners() == {
        UUID: {PIDS["victim"] + OFFSET: "victim", PIDS["mallory"] + OFFSET: "mallory"}
    }


def test_two_kernels_probing_at_once_each_find_their_own() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    probes = {}
    for k in PIDS:
        probes[k] = book.start(k, UUID, gpu_probe_signature(KEYS[k], k, UUID), KEYS[k])
    assert probes["victim"].size_bytes != probes["mallory"].size_bytes
    tick(book, gpu, 2)
    for k, probe in probes.items():
        gpu.memory[PIDS[k] + OFFSET] += probe.size_bytes
        book.step(probe.id, "held")
        tick(book, gpu)
    tick(book, gpu)
    for k, probe in probes.items():
        book.step(probe.id, "released")
        gpu.memory[PIDS[k] + OFFSET] -= probe.size_bytes
    tick(book, gpu, 2)
    assert {k: book.result(p.id).state for k, p in probes.items()} == {
        "victim": "mapped",
        "mallory": "mapped",
    }
    assert book.owners()[UUID] == {PIDS[k] + OFFSET: k for k in PIDS}


def test_a_probe_is_refused_without_the_kernels_own_key() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    forged = gpu_probe_signature(KEYS["mallory"], "victim", UUID)
    with refused(HTTPStatus.FORBIDDEN):
        book.start("victim", UUID, forged, KEYS["victim"])
    with refused(HTTPStatus.FORBIDDEN):
        book.start("victim", UUID, "", KEYS["victim"])
    with refused(HTTPStatus.NOT_FOUND):  # no running kernel has that id
        book.start("nobody", UUID, forged, None)
    good = gpu_probe_signature(KEYS["victim"], "victim", "GPU-other")
    with refused(HTTPStatus.NOT_FOUND):  # no GPU of this server has that UUID
        book.start("victim", "GPU-other", good, KEYS["victim"])
    with refused(HTTPStatus.NOT_FOUND):
        book.step("guessed-probe-id", "held")


def test_a_probe_out_of_order_or_twice_is_refused() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    sig = gpu_probe_signature(KEYS["victim"], "victim", UUID)
    probe = book.start("victim", UUID, sig, KEYS["victim"])
    with refused(HTTPStatus.CONFLICT):
        book.start("victim", UUID, sig, KEYS["victim"])
    with refused(HTTPStatus.CONFLICT):
        book.step(probe.id, "released")
    with refused(HTTPStatus.CONFLICT):  # before the server read the memory it starts from
        book.step(probe.id, "held")
    tick(book, gpu, 2)
    book.step(probe.id, "held")
    with refused(HTTPStatus.CONFLICT):
        book.step(probe.id, "held")


def test_a_kernel_busy_allocating_meanwhile_is_not_mapped_rather_than_guessed() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    sig = gpu_probe_signature(KEYS["victim"], "victim", UUID)
    probe = book.start("victim", UUID, sig, KEYS["victim"])
    tick(book, gpu, 2)
    # the notebook's own cell allocates 1 GiB while the probe holds its block
    gpu.memory[PIDS["victim"] + OFFSET] += probe.size_bytes + 1024 * MiB
    book.step(probe.id, "held")
    tick(book, gpu, 2)
    book.step(probe.id, "released")
    tick(book, gpu, 2)
    assert book.result(probe.id).state == "ambiguous"
    assert book.owners() == {}


def test_a_foreign_process_allocating_the_same_size_makes_it_ambiguous() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    sig = gpu_probe_signature(KEYS["victim"], "victim", UUID)
    probe = book.start("victim", UUID, sig, KEYS["victim"])
    tick(book, gpu, 2)
    for pid in (PIDS["victim"] + OFFSET, FOREIGN):
        gpu.memory[pid] += probe.size_bytes
    book.step(probe.id, "held")
    tick(book, gpu, 2)
    book.step(probe.id, "released")
    tick(book, gpu, 2)
    assert book.result(probe.id).state == "ambiguous"
    assert book.owners() == {}


def test_a_mapped_pid_stays_its_kernels_and_ends_with_its_process() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    assert identify(book, gpu, "victim") == "mapped"
    # mallory's allocation somehow lands in the victim's process: still the victim's
    assert identify(book, gpu, "mallory", PIDS["victim"] + OFFSET) == "taken"
    assert book.owners() == {UUID: {PIDS["victim"] + OFFSET: "victim"}}
    del gpu.memory[PIDS["victim"] + OFFSET]  # the kernel's process ended
    tick(book, gpu)
    assert book.owners() == {}


def test_a_probe_that_is_never_followed_expires() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    sig = gpu_probe_signature(KEYS["victim"], "victim", UUID)
    probe = book.start("victim", UUID, sig, KEYS["victim"])
    tick(book, gpu, 40)
    assert book.result(probe.id).state == "expired"
    # and the kernel may try again
    assert identify(book, gpu, "victim") == "mapped"


# -- the trust boundary: whatever another kernel sends, it moves nothing of anyone's -----

action = st.one_of(
    # start a probe naming any kernel, signed with its own key or with nothing
    st.tuples(
        st.just("start"),
        st.sampled_from(["victim", "mallory", "nobody", ""]),
        st.sampled_from([UUID, "GPU-other", ""]),
        # "stolen-key": signed with the named kernel's own key (read from its connection
        # file: all kernels run as one OS user), the worst case
        st.sampled_from(["own-key", "stolen-key", "victim-sig-of-other-gpu", "garbage"]),
    ),
    # move any probe it knows of (or a guessed id) to any step
    st.tuples(st.just("step"), st.integers(0, 5), st.sampled_from(["held", "released"])),
    # allocate or free any amount in its own process (a size it was given, or any)
    st.tuples(
        st.just("alloc"),
        st.one_of(st.sampled_from(SIZE_CHOICES), st.integers(-(2**36), 2**36)),
        st.booleans(),
    ),
    st.tuples(st.just("tick"), st.integers(1, 3)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(action, max_size=40), st.integers(0, 127))
def test_another_kernel_can_neither_take_nor_give_a_mapped_pid(
    actions: list[tuple[object, ...]], choose: int
) -> None:
    gpu = Gpu()
    book = book_with(gpu, choose)
    assert identify(book, gpu, "victim") == "mapped"
    victim_pid, mallory_pid = PIDS["victim"] + OFFSET, PIDS["mallory"] + OFFSET
    probes: list[str] = []
    for act in actions:
        kind = act[0]
        try:
            if kind == "start":
                _, named, uuid, how = act
                assert isinstance(named, str)
                assert isinstance(uuid, str)
                if how == "own-key":
                    sig = gpu_probe_signature(KEYS["mallory"], named, uuid)
                elif how == "stolen-key":
                    sig = gpu_probe_signature(KEYS.get(named, b"x"), named, uuid)
                elif how == "victim-sig-of-other-gpu":
                    sig = gpu_probe_signature(KEYS["victim"], named, "GPU-other")
                else:
                    sig = "0" * 64
                key = KEYS.get(named) if named in PIDS else None
                probes.append(book.start(named, uuid, sig, key).id)
            elif kind == "step":
                _, which, to = act
                assert isinstance(which, int)
                probe_id = probes[which] if which < len(probes) else f"guess-{which}"
                book.step(probe_id, "held" if to == "held" else "released")
            elif kind == "alloc":
                _, size, grow = act
                assert isinstance(size, int)
                after = gpu.memory[mallory_pid] + (size if grow else -size)
                gpu.memory[mallory_pid] = max(after, 0)
            else:
                assert isinstance(act[1], int)
                tick(book, gpu, act[1])
        except Refusal as e:
            if e.status not in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND, HTTPStatus.CONFLICT):
                raise
        owners = book.owners().get(UUID, {})
        # the victim's process stays the victim's, and only it is the victim's
        assert owners.get(victim_pid) == "victim"
        assert {pid for pid, k in owners.items() if k == "victim"} == {victim_pid}
        # the other tenant's process is nobody's: it never moved
        assert FOREIGN not in owners
        # what mallory may get is its own process, nothing else
        assert {pid for pid, k in owners.items() if k == "mallory"} <= {mallory_pid}


# -- the attribution, with host pids -----------------------------------------------------


def test_without_identified_processes_nothing_is_attributed_and_the_note_says_why() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    attributor = Attributor(claims=book)
    gpu.util = 100
    gpu.sm = {PIDS["mallory"] + OFFSET: 99.0}
    for _ in range(5):
        result = attributor.update(gpu.snapshot(), KERNELS, TREES)
    assert all(k.cost_micro == 0 for k in result.kernels)
    assert result.note == NOTE_CONTAINER


def test_identified_kernels_pay_for_their_samples_and_other_tenants_are_not_attributed() -> None:
    gpu = Gpu()
    book = book_with(gpu)
    attributor = Attributor(claims=book)
    for k in PIDS:
        assert identify(book, gpu, k) == "mapped"
    attributor.update(gpu.snapshot(), KERNELS, TREES)
    gpu.util = 100
    # the driver names the dominant process of each sample: mallory's, then the tenant's
    gpu.sm = {PIDS["mallory"] + OFFSET: 99.0}
    for _ in range(10):
        result = attributor.update(gpu.snapshot(), KERNELS, TREES)
    gpu.sm = {FOREIGN: 97.0}
    for _ in range(10):
        result = attributor.update(gpu.snapshot(), KERNELS, TREES)
    costs = {k.info.id: k.cost_micro for k in result.kernels}
    used = result.snapshot.gpus[0].used_micro
    assert costs["victim"] == 0
    assert costs["mallory"] > 0
    # the tenant's half of the used time is not attributed to any kernel
    assert costs["mallory"] <= used // 2 + 1
    assert (
        sum(costs.values()) + result.unattributed_micro + result.idle_micro
        == result.snapshot.gpu_cost_micro
    )
    assert result.note == NOTE_IDENTIFIED
    assert [(o.gpu_index, o.host_pid) for o in result.others] == [(0, FOREIGN)]
    assert result.identified == {
        0: {PIDS["victim"] + OFFSET: "victim", PIDS["mallory"] + OFFSET: "mallory"}
    }


def test_no_probe_where_nvml_lists_the_kernels_own_pid() -> None:
    gpu = Gpu()
    gpu.memory[PIDS["victim"]] = gpu.memory.pop(PIDS["victim"] + OFFSET)  # no container
    book = book_with(gpu)
    sig = gpu_probe_signature(KEYS["victim"], "victim", UUID)
    probe = book.start("victim", UUID, sig, KEYS["victim"], TREES["victim"])
    assert probe.state == "visible"
    assert probe.size_bytes == 0
    with refused(HTTPStatus.NOT_FOUND):  # nothing to follow
        book.step(probe.id, "held")
    assert book.owners() == {}


def test_a_kernel_is_one_process_a_second_pid_is_not_given_to_it() -> None:
    # mallory signs as the victim (it read the victim's connection file: one OS user) and
    # allocates in its own process: once the victim is identified, that gets nothing
    gpu = Gpu()
    book = book_with(gpu)
    assert identify(book, gpu, "victim") == "mapped"
    assert identify(book, gpu, "victim", PIDS["mallory"] + OFFSET) == "taken"
    assert book.owners() == {UUID: {PIDS["victim"] + OFFSET: "victim"}}
