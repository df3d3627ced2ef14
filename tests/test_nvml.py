"""NvmlSource against a stub of pynvml (tests/nvml_stub.py): no GPU needed.

Every assertion is something a user or an admin would see: a number in the panel, a
reason next to a missing number, which GPUs are billed, a line in the server log.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pynvml
import pytest
from nvml_stub import (
    DRIVER_418,
    DRIVER_470,
    DRIVER_535,
    DRIVER_550,
    DRIVER_570,
    NOT_AVAILABLE_U64,
    FakeGpu,
    FakeNvml,
    FakeProcess,
    MiB,
    a100_80gb,
    h100_80gb,
    not_supported,
    tesla_k80,
    tesla_p100,
    tesla_t4,
)

from jupyter_gpucost.telemetry.base import (
    GpuReading,
    ProcessReading,
    SourceUnavailable,
    TelemetrySource,
)
from jupyter_gpucost.telemetry.nvml import NvmlSource

A100_0 = "GPU-3f1c6a2e-8d4b-4c0e-9a51-2b7e0d9c4f11"
# shares the "GPU-3f" prefix with A100_0 on purpose
A100_1 = "GPU-3f9d02b7-51e6-7a3c-0d2e-c4b1a8e07f25"
H100_0 = "GPU-b2e7d1a4-6c39-4f80-a2d5-91e3c07b6d48"
MIG_ON_A100_1 = "MIG-8c1b2d3e-4f50-5a6b-9c7d-0e1f2a3b4c5d"

DYNAMIC = ("utilization_pct", "memory_used_bytes", "power_w", "energy_j", "processes")
LOGGER = "jupyter_gpucost.telemetry.nvml"


def two_a100s(**kw: Any) -> list[FakeGpu]:
    return [
        a100_80gb(A100_0, **kw),
        a100_80gb(A100_1, processes=[FakeProcess(51234, 20480 * MiB)], **kw),
    ]


def opened(nvml: FakeNvml, env: dict[str, str] | None = None) -> NvmlSource:
    source = NvmlSource(nvml=nvml, environ={} if env is None else env)
    source.open()
    return source


@pytest.fixture
def a100_box() -> FakeNvml:
    """A p4de-like box cut down to two A100-SXM4-80GB, driver 550."""
    return FakeNvml(two_a100s(), DRIVER_550)


# -- the happy path -------------------------------------------------------------------------


def test_is_a_telemetry_source() -> None:
    source = NvmlSource(nvml=FakeNvml([]))
    assert isinstance(source, TelemetrySource)
    assert source.name == "nvml"
    assert source.simulated is False


def test_reads_every_gpu_in_units_the_ui_shows(a100_box: FakeNvml) -> None:
    readings = opened(a100_box).read()

    assert readings == (
        GpuReading(
            index=0,
            uuid=A100_0,
            name="NVIDIA A100-SXM4-80GB",
            nvml_index=0,
            memory_total_bytes=85899345920,
            memory_used_bytes=61203267584,
            utilization_pct=97.0,
            power_w=391.2,  # 391200 mW
            energy_j=256172.5,  # 256172500 mJ
            processes=(ProcessReading(pid=48448, used_memory_bytes=58368 * MiB),),
        ),
        GpuReading(
            index=1,
            uuid=A100_1,
            name="NVIDIA A100-SXM4-80GB",
            nvml_index=1,
            memory_total_bytes=85899345920,
            memory_used_bytes=61203267584,
            utilization_pct=97.0,
            power_w=391.2,
            energy_j=256172.5,
            processes=(ProcessReading(pid=51234, used_memory_bytes=20480 * MiB),),
        ),
    )


def test_values_follow_the_device_between_reads(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    source.read()
    gpu = a100_box.gpus[0]
    gpu.utilization, gpu.power_mw, gpu.energy_mj = 0, 61234, 256234000
    gpu.processes = []

    first = source.read()[0]

    assert first.utilization_pct == 0.0
    assert first.power_w == pytest.approx(61.234)
    assert first.energy_j == pytest.approx(256234.0)
    assert first.processes == ()  # none running: an empty list, not "unknown"


def test_memory_used_matches_nvidia_smi_on_recent_drivers(a100_box: FakeNvml) -> None:
    # drivers >= 510 count their own reservation as "used" in the v1 call; v2 leaves it
    # out, as nvidia-smi does
    reading = opened(a100_box).read()[0]
    assert reading.memory_used_bytes == 61203267584
    assert a100_box.calls["nvmlDeviceGetMemoryInfo_v2"] > 0


def test_status_names_driver_and_nvml_versions(a100_box: FakeNvml) -> None:
    status = opened(a100_box, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).status()

    assert status.source == "nvml"
    assert status.simulated is False
    assert status.available is True
    assert status.reason is None
    assert status.detail["driver_version"] == "550.54.15"
    assert status.detail["nvml_version"] == "12.550.54.15"
    assert status.detail["cuda_driver_version"] == "12.4"
    assert status.detail["visible_devices"] == "0,1"
    assert status.detail["device_count"] == "2"
    assert "device_order" not in status.detail


def test_versions_are_read_once(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    for _ in range(10):
        source.read()
        source.status()
    assert a100_box.calls["nvmlSystemGetDriverVersion"] == 1
    assert a100_box.calls["nvmlSystemGetNVMLVersion"] == 1
    assert a100_box.calls["nvmlDeviceGetName"] == 2
    assert a100_box.calls["nvmlDeviceGetUUID"] == 2


def test_mixed_box_says_cuda_may_number_gpus_differently() -> None:
    nvml = FakeNvml([h100_80gb(), tesla_t4()], DRIVER_570)
    source = opened(nvml)

    names = [r.name for r in source.read()]

    assert names == ["NVIDIA H100 80GB HBM3", "Tesla T4"]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in source.status().detail["device_order"]


def test_no_order_note_for_one_gpu() -> None:
    source = opened(FakeNvml([tesla_t4()], DRIVER_535))
    assert "device_order" not in source.status().detail


# -- NVML cannot start ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "sentence"),
    [
        (
            pynvml.NVMLError_LibraryNotFound,
            "libnvidia-ml.so not found: no NVIDIA driver on this machine",
        ),
        (pynvml.NVMLError_DriverNotLoaded, "NVIDIA driver is not loaded"),
        (
            pynvml.NVMLError_NoPermission,
            "no permission to use the NVIDIA driver "
            "(the server's user cannot open /dev/nvidiactl or /dev/nvidia*)",
        ),
        (
            pynvml.NVMLError_LibRmVersionMismatch,
            "the NVIDIA driver and libnvidia-ml.so are different versions "
            "(driver upgraded without a reboot, or a container with a mismatched library)",
        ),
        (pynvml.NVMLError_Unknown, "NVML failed to start: unknown error"),
        (pynvml.NVMLError_Timeout, "NVML failed to start: Timeout"),
    ],
)
def test_init_errors_become_a_sentence(error: type[Exception], sentence: str) -> None:
    nvml = FakeNvml(two_a100s(), init_error=error())
    source = NvmlSource(nvml=nvml, environ={})

    with pytest.raises(SourceUnavailable) as raised:
        source.open()

    assert raised.value.reason == sentence
    status = source.status()
    assert status.available is False
    assert status.reason == sentence
    assert source.read() == ()
    source.close()
    assert nvml.calls["nvmlShutdown"] == 0  # never started, nothing to shut down


def test_missing_binding_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" fail
    source = NvmlSource(environ={})

    with pytest.raises(SourceUnavailable, match="nvidia-ml-py is not installed"):
        source.open()
    assert "nvidia-ml-py is not installed" in (source.status().reason or "")


def test_failing_device_count_shuts_nvml_down() -> None:
    nvml = FakeNvml(two_a100s())

    def broken_count() -> int:
        raise pynvml.NVMLError_Unknown()

    nvml.nvmlDeviceGetCount = broken_count  # type: ignore[method-assign]
    with pytest.raises(SourceUnavailable, match="could not list the GPUs: Unknown Error"):
        opened(nvml)
    assert nvml.refcount == 0


def test_unexpected_failure_while_listing_gpus_is_still_a_clean_refusal() -> None:
    nvml = FakeNvml(two_a100s())

    def broken_name(handle: Any) -> str:
        raise RuntimeError("binding bug")

    nvml.nvmlDeviceGetName = broken_name  # type: ignore[method-assign]
    source = NvmlSource(nvml=nvml, environ={})
    with pytest.raises(SourceUnavailable, match="listing the GPUs failed: binding bug"):
        source.open()
    assert nvml.refcount == 0
    assert source.status().available is False


# -- per-field failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ("nvmlDeviceGetUtilizationRates", "utilization_pct"),
        ("nvmlDeviceGetPowerUsage", "power_w"),
        ("nvmlDeviceGetTotalEnergyConsumption", "energy_j"),
        ("nvmlDeviceGetComputeRunningProcesses", "processes"),
    ],
)
def test_not_supported_field_is_none_with_reason_and_not_asked_again(call: str, field: str) -> None:
    nvml = FakeNvml([a100_80gb(errors={call: not_supported()})], DRIVER_550)
    source = opened(nvml)

    readings = [source.read()[0] for _ in range(5)]

    for reading in readings:
        assert getattr(reading, field) is None
        assert reading.unavailable == {field: "not supported"}
        assert reading.memory_used_bytes == 61203267584  # the rest still reads
    versioned = call + ("_v3" if field == "processes" else "")
    assert nvml.calls[versioned] == 1


def test_pascal_and_kepler_have_no_energy_counter() -> None:
    nvml = FakeNvml([tesla_p100(), tesla_k80()], DRIVER_470)
    source = opened(nvml)

    for _ in range(3):
        p100, k80 = source.read()
        assert p100.energy_j is None
        assert k80.energy_j is None
        assert p100.unavailable == {"energy_j": "not supported"}
        assert k80.unavailable == {"energy_j": "not supported"}
        assert p100.power_w == 201.5
        assert k80.power_w == 58.0
    assert nvml.calls["nvmlDeviceGetTotalEnergyConsumption"] == 2  # once per device


def test_unknown_error_is_reported_and_retried() -> None:
    nvml = FakeNvml([a100_80gb(errors={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_Unknown()})])
    source = opened(nvml)

    broken = source.read()[0]
    assert broken.power_w is None
    assert broken.unavailable == {"power_w": "unknown error"}

    del nvml.gpus[0].errors["nvmlDeviceGetPowerUsage"]
    healed = source.read()[0]
    assert healed.power_w == 391.2
    assert healed.unavailable == {}


def test_other_nvml_errors_carry_their_message() -> None:
    gpu = a100_80gb(
        errors={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVMLError_NoPermission()}
    )
    reading = opened(FakeNvml([gpu])).read()[0]
    assert reading.processes is None
    assert reading.unavailable == {"processes": "Insufficient Permissions"}


def test_unexpected_exception_does_not_stop_the_sampler(caplog: pytest.LogCaptureFixture) -> None:
    gpu = a100_80gb(errors={"nvmlDeviceGetUtilizationRates": ValueError("binding bug")})
    source = opened(FakeNvml([gpu, a100_80gb(A100_1)]))

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        for _ in range(20):
            broken, fine = source.read()

    assert broken.utilization_pct is None
    assert broken.memory_used_bytes is None
    assert broken.unavailable["utilization_pct"] == "error: binding bug"
    assert fine.utilization_pct == 97.0
    assert len([r for r in caplog.records if "binding bug" in r.getMessage()]) == 1


# -- a GPU falls off the bus ----------------------------------------------------------------


def test_lost_gpu_stays_in_readings_marked_lost(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    assert not any(r.lost for r in source.read())

    a100_box.gpus[1].lost = True
    readings = source.read()

    assert len(readings) == 2
    fine, lost = readings
    assert fine.lost is False
    assert fine.power_w == 391.2
    assert lost.lost is True
    assert (lost.index, lost.nvml_index, lost.uuid) == (1, 1, A100_1)
    assert lost.name == "NVIDIA A100-SXM4-80GB"  # the price still applies
    assert lost.memory_total_bytes == 85899345920
    for name in DYNAMIC:
        assert getattr(lost, name) is None
    assert lost.unavailable == dict.fromkeys(DYNAMIC, "gpu lost")

    status = source.status()
    assert status.available is True
    assert "GPU 1 is lost" in (status.reason or "")


def test_lost_gpu_is_not_polled_again(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    a100_box.gpus[1].lost = True
    source.read()
    before = sum(a100_box.calls.values())

    for _ in range(10):
        assert [r.lost for r in source.read()] == [False, True]

    # six calls per read for GPU 0 (utilisation, memory, power, energy, processes and
    # their utilisation), none for the lost GPU 1
    assert sum(a100_box.calls.values()) - before == 10 * 6


def test_gpu_lost_before_start_is_still_billed() -> None:
    gpus = two_a100s()
    gpus[0].lost = True
    source = opened(FakeNvml(gpus))

    lost, fine = source.read()

    assert lost.lost is True
    assert lost.nvml_index == 0
    assert fine.lost is False
    assert fine.utilization_pct == 97.0
    assert "GPU 0 is lost" in (source.status().reason or "")


# -- versioned process calls ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "binding", "expected_calls", "call_in_use"),
    [
        # 550: _v3 exists and is the only one ever called
        (
            DRIVER_550,
            "13.x",
            {"_v3": 6, "_v2": 0, "": 0},
            "nvmlDeviceGetComputeRunningProcesses_v3",
        ),
        # 470 (last for K80): no _v3 -> probed once, then _v2 every time
        (
            DRIVER_470,
            "13.x",
            {"_v3": 1, "_v2": 6, "": 0},
            "nvmlDeviceGetComputeRunningProcesses_v2",
        ),
        # 418 with nvidia-ml-py 11.450: the binding has no _v3; its unversioned call is v1
        (
            DRIVER_418,
            "11.450",
            {"_v3": 0, "_v2": 1, "": 6},
            "nvmlDeviceGetComputeRunningProcesses",
        ),
    ],
)
def test_process_call_is_probed_once(
    driver: Any, binding: str, expected_calls: dict[str, int], call_in_use: str
) -> None:
    nvml = FakeNvml(two_a100s(), driver, binding=binding)
    source = opened(nvml)

    for _ in range(3):
        readings = source.read()
        assert [r.processes for r in readings] == [
            (ProcessReading(48448, 58368 * MiB),),
            (ProcessReading(51234, 20480 * MiB),),
        ]

    calls = {
        suffix: nvml.calls["nvmlDeviceGetComputeRunningProcesses" + suffix]
        for suffix in expected_calls
    }
    assert calls == expected_calls
    assert source.status().detail["process_call"] == call_in_use


def test_driver_without_any_usable_process_call() -> None:
    # driver 418 with nvidia-ml-py 13: _v3 and _v2 missing, and the unversioned call is
    # an alias of _v3 that raises NVMLLibraryMismatchError
    nvml = FakeNvml(two_a100s(), DRIVER_418)
    source = opened(nvml)

    for _ in range(5):
        for reading in source.read():
            assert reading.processes is None
            assert reading.unavailable == {"processes": "not supported by this NVIDIA driver"}
            assert reading.utilization_pct == 97.0

    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 1
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 1
    assert "process_call" not in source.status().detail


def test_memory_info_falls_back_to_v1_on_old_drivers_once() -> None:
    nvml = FakeNvml([tesla_k80()], DRIVER_470)
    source = opened(nvml)

    for _ in range(5):
        reading = source.read()[0]
        assert reading.memory_used_bytes == 2048 * MiB
        assert reading.memory_total_bytes == 11996954624

    assert nvml.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert nvml.calls["nvmlDeviceGetMemoryInfo"] == 1 + 5  # open (total) + reads


def test_process_memory_not_available() -> None:
    gpu = tesla_t4(
        processes=[
            FakeProcess(1001, None),  # what nvidia-ml-py gives under WDDM / some vGPUs
            FakeProcess(1002, NOT_AVAILABLE_U64),  # the raw NVML value
            FakeProcess(1003, 1536 * MiB),
        ]
    )
    reading = opened(FakeNvml([gpu], DRIVER_535)).read()[0]
    assert reading.processes == (
        ProcessReading(1001, None),
        ProcessReading(1002, None),
        ProcessReading(1003, 1536 * MiB),
    )


# -- which GPUs this server may use ---------------------------------------------------------


def visible(nvml: FakeNvml, env: dict[str, str]) -> list[tuple[int, int | None, str]]:
    return [(r.index, r.nvml_index, r.uuid) for r in opened(nvml, env).read()]


def test_cuda_visible_devices_by_index(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"CUDA_VISIBLE_DEVICES": "1"}) == [(0, 1, A100_1)]


def test_cuda_visible_devices_keeps_listed_order(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"CUDA_VISIBLE_DEVICES": "1,0"}) == [(0, 1, A100_1), (1, 0, A100_0)]


def test_cuda_visible_devices_by_uuid(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"CUDA_VISIBLE_DEVICES": A100_1}) == [(0, 1, A100_1)]


def test_cuda_visible_devices_by_uuid_prefix() -> None:
    nvml = FakeNvml([a100_80gb(A100_0), h100_80gb(H100_0)])
    assert visible(nvml, {"CUDA_VISIBLE_DEVICES": "GPU-b2e7"}) == [(0, 1, H100_0)]


def test_ambiguous_uuid_prefix_is_invalid(a100_box: FakeNvml) -> None:
    source = opened(a100_box, {"CUDA_VISIBLE_DEVICES": "GPU-3f"})
    assert source.read() == ()
    assert "shared by several GPUs" in source.status().detail["visibility_notes"]


@pytest.mark.parametrize("bad", ["GPU-deadbeef", "7", "-1", "cuda0"])
def test_invalid_entry_ends_the_list_like_cuda(a100_box: FakeNvml, bad: str) -> None:
    source = opened(a100_box, {"CUDA_VISIBLE_DEVICES": f"0,{bad},1"})

    assert [(r.index, r.nvml_index) for r in source.read()] == [(0, 0)]
    notes = source.status().detail["visibility_notes"]
    assert repr(bad) in notes
    assert "every entry after it" in notes


def test_minus_one_hides_every_gpu(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"CUDA_VISIBLE_DEVICES": "-1"}) == []


@pytest.mark.parametrize("value", ["", " "])
def test_empty_cuda_visible_devices_means_no_gpu(a100_box: FakeNvml, value: str) -> None:
    source = opened(a100_box, {"CUDA_VISIBLE_DEVICES": value})

    assert source.read() == ()
    status = source.status()
    assert status.available is True
    assert "no GPU visible" in (status.reason or "")
    assert status.detail["visible_devices"] == ""


def test_a_gpu_listed_twice_is_billed_once(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"CUDA_VISIBLE_DEVICES": f"0,{A100_0}"}) == [(0, 0, A100_0)]


def test_cuda_visible_devices_wins_over_nvidia_visible_devices(a100_box: FakeNvml) -> None:
    env = {"CUDA_VISIBLE_DEVICES": "1", "NVIDIA_VISIBLE_DEVICES": "all"}
    assert visible(a100_box, env) == [(0, 1, A100_1)]


def test_mig_uuid_maps_to_its_gpu() -> None:
    gpus = two_a100s()
    gpus[1].mig_uuids = [MIG_ON_A100_1]
    source = opened(FakeNvml(gpus), {"CUDA_VISIBLE_DEVICES": MIG_ON_A100_1})

    assert [(r.nvml_index, r.uuid) for r in source.read()] == [(1, A100_1)]
    assert "MIG slice of NVML GPU 1" in source.status().detail["visibility_notes"]


def test_old_style_mig_uuid_maps_to_its_gpu(a100_box: FakeNvml) -> None:
    env = {"CUDA_VISIBLE_DEVICES": f"MIG-{A100_1}/1/0"}
    assert visible(a100_box, env) == [(0, 1, A100_1)]


def test_unknown_mig_uuid_is_noted_not_guessed(a100_box: FakeNvml) -> None:
    source = opened(a100_box, {"CUDA_VISIBLE_DEVICES": f"{MIG_ON_A100_1},0"})
    assert [r.nvml_index for r in source.read()] == [0]
    assert "could not be found" in source.status().detail["visibility_notes"]


@pytest.mark.parametrize("value", ["all", "ALL"])
def test_nvidia_visible_devices_all(a100_box: FakeNvml, value: str) -> None:
    assert [r.nvml_index for r in opened(a100_box, {"NVIDIA_VISIBLE_DEVICES": value}).read()] == [
        0,
        1,
    ]


@pytest.mark.parametrize("value", ["none", "void", ""])
def test_nvidia_visible_devices_none(a100_box: FakeNvml, value: str) -> None:
    source = opened(a100_box, {"NVIDIA_VISIBLE_DEVICES": value})
    assert source.read() == ()
    assert "NVIDIA_VISIBLE_DEVICES" in (source.status().reason or "")


def test_nvidia_visible_devices_on_a_host_filters_by_index(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"NVIDIA_VISIBLE_DEVICES": "1"}) == [(0, 1, A100_1)]


def test_nvidia_visible_devices_in_a_container_is_already_applied() -> None:
    # the runtime mounted host GPU 3 only; inside, NVML calls it GPU 0
    nvml = FakeNvml([a100_80gb(A100_1)])
    assert visible(nvml, {"NVIDIA_VISIBLE_DEVICES": "3"}) == [(0, 0, A100_1)]


def test_nvidia_visible_devices_by_uuid(a100_box: FakeNvml) -> None:
    assert visible(a100_box, {"NVIDIA_VISIBLE_DEVICES": A100_1}) == [(0, 1, A100_1)]


def test_gpus_hidden_by_cgroups_are_not_billed() -> None:
    gpus = [h100_80gb(f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd") for i in range(4)]
    gpus[0].accessible = gpus[3].accessible = False
    source = opened(FakeNvml(gpus))

    assert [r.nvml_index for r in source.read()] == [1, 2]
    assert "Insufficient Permissions" in source.status().detail["visibility_notes"]


# -- logs -----------------------------------------------------------------------------------


def test_each_problem_is_logged_once_not_every_second(caplog: pytest.LogCaptureFixture) -> None:
    gpus = [
        tesla_k80(errors={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_Unknown()}),
        tesla_k80("GPU-e81f4b90-2c7a-1d35-f6b8-0a94c3d2e518"),
        tesla_k80("GPU-e81f4b90-2c7a-1d35-f6b8-0a94c3d2e519"),
    ]
    nvml = FakeNvml(gpus, DRIVER_470)
    source = opened(nvml)

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for i in range(50):
            if i == 10:
                gpus[2].lost = True
            source.read()
            source.status()

    messages = [r.getMessage() for r in caplog.records]
    power = [m for m in messages if "power_w" in m]
    energy = [m for m in messages if "energy_j" in m]
    lost = [m for m in messages if "is lost" in m]
    assert len(power) == 1
    assert "unknown error" in power[0]
    assert len(energy) == 3  # once per device: each K80 lacks the counter
    assert len(lost) == 1
    assert "GPU 2" in lost[0]
    assert len(messages) == 5


# -- lifecycle ------------------------------------------------------------------------------


def test_close_is_idempotent(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    source.close()
    source.close()

    assert a100_box.calls["nvmlShutdown"] == 1
    assert a100_box.refcount == 0
    assert source.read() == ()
    status = source.status()
    assert status.available is False
    assert status.reason == "NVML telemetry is closed"


def test_close_swallows_shutdown_errors(a100_box: FakeNvml) -> None:
    a100_box.shutdown_error = pynvml.NVMLError_Unknown()
    source = opened(a100_box)
    source.close()
    source.close()
    assert a100_box.calls["nvmlShutdown"] == 1


def test_open_twice_initialises_once_and_reopen_after_close_works(a100_box: FakeNvml) -> None:
    source = opened(a100_box)
    source.open()
    assert a100_box.calls["nvmlInit"] == 1

    source.close()
    source.open()
    assert a100_box.refcount == 1
    assert len(source.read()) == 2
    assert source.status().available is True


def test_per_process_utilisation_is_read_and_kept_per_pid() -> None:
    gpu = a100_80gb(processes=[FakeProcess(101, 30 * 2**30, 70), FakeProcess(202, 2**30, 10)])
    nvml = FakeNvml([gpu], DRIVER_550)
    source = NvmlSource(nvml=nvml, environ={})
    source.open()
    # the first call (timestamp 0) answers old samples too: it only sets where to start
    (reading,) = source.read()
    assert [p.sm_utilization_pct for p in reading.processes or ()] == [None, None]
    # as on an H100, a sample names only the process that dominated it
    (reading,) = source.read()
    assert [(p.pid, p.sm_utilization_pct, p.sm_samples) for p in reading.processes or ()] == [
        (101, 70.0, 1),
        (202, None, 0),
    ]
    # polled between readings, the samples add up per process over the interval
    source.poll()
    source.poll()
    (reading,) = source.read()
    assert [(p.pid, p.sm_pct_sum, p.sm_samples) for p in reading.processes or ()] == [
        (101, 210.0, 3),
        (202, 0.0, 0),
    ]
    # no process computed since the last call: NVML says NOT_FOUND, which is no sample,
    # not an error
    for p in gpu.processes:
        p.smUtil = None
    (reading,) = source.read()
    assert [p.sm_utilization_pct for p in reading.processes or ()] == [None, None]
    assert "process_utilization" not in reading.unavailable


def test_per_process_utilisation_not_supported_is_said_once() -> None:
    gpu = a100_80gb(
        processes=[FakeProcess(101, 2**30, 50)],
        errors={"nvmlDeviceGetProcessUtilization": not_supported()},
    )
    nvml = FakeNvml([gpu], DRIVER_550)
    source = NvmlSource(nvml=nvml, environ={})
    source.open()
    (reading,) = source.read()
    assert reading.unavailable["process_utilization"] == "not supported"
    assert reading.processes is not None
    assert reading.processes[0].used_memory_bytes == 2**30
    assert reading.processes[0].sm_utilization_pct is None


def test_energy_alone_is_read_for_a_cell() -> None:
    nvml = FakeNvml([a100_80gb(), tesla_k80()], DRIVER_550)
    source = NvmlSource(nvml=nvml, environ={})
    source.open()
    source.read()  # the K80 has no energy counter: learnt once, not asked again
    before = dict(nvml.calls)
    nvml.gpus[0].energy_mj += 1500
    assert source.read_energy_j() == {0: pytest.approx(256174.0)}
    # one call per GPU that has the counter, and nothing else
    new = {k: v - before.get(k, 0) for k, v in nvml.calls.items() if v != before.get(k, 0)}
    assert new == {"nvmlDeviceGetTotalEnergyConsumption": 1}


def test_samples_are_polled_between_readings_only_on_a_gpu_with_processes() -> None:
    busy = a100_80gb(processes=[FakeProcess(101, 2**30, 90)])
    empty = a100_80gb(uuid="GPU-empty", processes=[])
    nvml = FakeNvml([busy, empty], DRIVER_550)
    source = NvmlSource(nvml=nvml, environ={})
    source.open()
    source.read()
    before = nvml.calls["nvmlDeviceGetProcessUtilization"]
    for _ in range(3):
        source.poll()
    # the empty GPU is not asked (it would answer NOT_FOUND, 3 ms a call on an H100)
    assert nvml.calls["nvmlDeviceGetProcessUtilization"] - before == 3
    busy_reading, empty_reading = source.read()
    (p,) = busy_reading.processes or ()
    assert (p.sm_utilization_pct, p.sm_samples) == (90.0, 4)
    assert empty_reading.processes == ()
