"""The routes a kernel identifies its own GPU process with (:mod:`.gpu_claims`).

``POST gpucost/api/kernels/gpu-probes`` starts a probe (``kernel_id``, ``gpu_uuid`` and
``signature``, :func:`~jupyter_gpucost.core.protocol.gpu_probe_signature` with the
kernel's connection key); ``POST .../gpu-probes/<id>`` moves it on (``{"step": "held"}``, then
``{"step": "released"}``); ``GET .../gpu-probes/<id>`` reads how it ended. Open to the
kernels' token and to users; thin over the claim book, which touches no I/O.
"""

from __future__ import annotations

from typing import Literal

from ...core.i18n import _
from ...core.refusal import Refusal
from ..inputs import one_of
from ..kernel_auth import user_or_kernel
from ..web import API_PREFIX, GpuCostHandler, Route
from .gpu_claims import ClaimBook, Probe

STEPS: tuple[Literal["held", "released"], ...] = ("held", "released")


def answer(probe: Probe, hold_s: float) -> dict[str, object]:
    return {
        "probe_id": probe.id,
        "gpu_uuid": probe.gpu_uuid,
        "size_bytes": probe.size_bytes,
        "hold_s": hold_s,
        "state": probe.state,
        "host_pid": probe.host_pid,
        # the steps the kernel waits for: the memory it starts from was read, and readings
        # were taken while it held its block
        "baseline_read": probe.baseline is not None,
        "held_readings": probe.held_readings,
    }


def text_field(body: dict[str, object], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise Refusal(
            _("{name} must be a non-empty string of at most 200 characters").format(name=name)
        )
    return value


class ProbesHandler(GpuCostHandler):
    kernel_methods = frozenset({"POST"})

    @property
    def book(self) -> ClaimBook:
        return self.service.claims

    def connection_key(self, kernel_id: str) -> bytes | None:
        """The kernel's own connection key (its messages' HMAC key), or None when no running
        kernel has that id."""
        try:
            km = self.kernel_manager.get_kernel(kernel_id)
        except KeyError:
            return None
        key = getattr(getattr(km, "session", None), "key", None)
        return key if isinstance(key, bytes) else b""

    @user_or_kernel
    def post(self) -> None:
        body = self.body()
        kernel_id = text_field(body, "kernel_id")
        gpu_uuid = text_field(body, "gpu_uuid")
        signature = text_field(body, "signature")
        probe = self.book.start(
            kernel_id,
            gpu_uuid,
            signature,
            self.connection_key(kernel_id),
            # the kernel's processes as the server sees them: NVML may list them already
            self.service.tracker.trees().get(kernel_id, frozenset()),
        )
        self.set_status(201)
        self.write_json(answer(probe, self.book.hold_s))


class ProbeHandler(GpuCostHandler):
    kernel_methods = frozenset({"GET", "POST"})

    @user_or_kernel
    def get(self, probe_id: str) -> None:
        self.write_json(answer(self.service.claims.result(probe_id), self.service.claims.hold_s))

    @user_or_kernel
    def post(self, probe_id: str) -> None:
        step = self.body().get("step")
        if step not in STEPS:
            raise Refusal(one_of("step", STEPS, step))
        to: Literal["held", "released"] = "held" if step == "held" else "released"
        probe = self.service.claims.step(probe_id, to)
        self.write_json(answer(probe, self.service.claims.hold_s))


def probe_handlers() -> list[Route]:
    return [
        (f"{API_PREFIX}/kernels/gpu-probes", ProbesHandler),
        (f"{API_PREFIX}/kernels/gpu-probes/([A-Za-z0-9_-]{{1,64}})", ProbeHandler),
    ]
