"""The status document, built in one place (status.py) from typed inputs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.core.meter import Meter
from jupyter_gpucost.server.ledger import Reset
from jupyter_gpucost.server.record.recorder import LiveTotals
from jupyter_gpucost.server.status import StatusInputs, status_document
from jupyter_gpucost.server.status_ledger import LedgerFacts
from jupyter_gpucost.telemetry.base import GpuReading, TelemetryStatus

T0 = datetime(2026, 11, 22, tzinfo=UTC)


def inputs(ledger: LedgerFacts, *, name: str = "NVIDIA A100-SXM4-80GB") -> StatusInputs:
    policy = PricePolicy(catalog=load_catalog(), region="us-east-1")
    meter = Meter(
        policy=policy, rule=BillingRule(1, 60), sample_interval_s=3600, start_us=0, started=T0
    )
    reading = GpuReading(
        index=0,
        uuid="GPU-0",
        name=name,
        memory_total_bytes=85_899_345_920,
        utilization_pct=50.0,
        power_w=200.0,
    )
    snapshot = meter.update([reading], 3_600_000_000, T0)
    return StatusInputs(
        snapshot=snapshot,
        telemetry=TelemetryStatus(source="nvml", simulated=False, available=True),
        policy=policy,
        rule=BillingRule(1, 60),
        currency="USD",
        currency_symbol="$",
        session_id="s1",
        totals=None,
        ledger=ledger,
        carbon_intensity_g_per_kwh=500.0,
        peak_memory_bytes=None,
        attribution=None,
        budget={"state": "ok"},
    )


def codes(document: dict[str, object]) -> list[str]:
    return [w["code"] for w in document["warnings"]]  # type: ignore[attr-defined,index]


def test_a_ledger_that_could_not_open_is_a_warning() -> None:
    document = status_document(inputs(LedgerFacts(enabled=False, error="disk full")))
    assert codes(document) == ["ledger-unavailable"]
    assert "No ledger (disk full)" in document["warnings"][0]["message"]
    assert document["ledger"] == {"enabled": False, "reason": "disk full"}
    assert document["today_usd"] is None


def test_no_ledger_by_choice_is_not_a_warning() -> None:
    document = status_document(inputs(LedgerFacts(enabled=False)))
    assert codes(document) == []
    assert document["ledger"] == {"enabled": False, "reason": None}


def test_a_reset_ledger_is_named_after_the_meter_s_own_warnings() -> None:
    ledger = LedgerFacts(
        enabled=True,
        url="sqlite:///x/ledger.sqlite",
        flush_interval_s=5.0,
        timezone="UTC",
        reset=Reset("/x/ledger.sqlite.corrupt-1", "malformed", 3, 1_250_000),
    )
    # a GPU priced at an upper bound: the meter's warning comes first, then the ledger's
    document = status_document(inputs(ledger, name="Mystery GPU 9000"))
    assert codes(document) == ["price-upper-bound", "ledger-reset"]
    assert document["price_basis"] == "upper-bound"
    assert "no price for Mystery GPU 9000" in document["price_basis_reasons"][0]
    assert document["warnings"][1]["message"] == (
        "The ledger was damaged and was moved to /x/ledger.sqlite.corrupt-1 (it held 3 "
        "sessions costing $1.25); a fresh one was started, so earlier sessions are not in "
        "today's and this month's totals."
    )
    assert document["ledger"] == {
        "enabled": True,
        "url": "sqlite:///x/ledger.sqlite",
        "flush_interval_s": 5.0,
        "timezone": "UTC",
        "reset_from": "/x/ledger.sqlite.corrupt-1",
        "reset": {
            "file": "/x/ledger.sqlite.corrupt-1",
            "reason": "malformed",
            "sessions": 3,
            "cost_micro": 1_250_000,
            "cost_micro_usd": 1_250_000,
        },
        "reachable": True,
        "unreachable_since": None,
        "error": None,
        "unwritten_s": 0.0,
        "unwritten_micro": 0,
        "unwritten_micro_usd": 0,
        "journaled": False,
    }


def test_an_unreachable_ledger_says_since_when_and_what_waits() -> None:
    ledger = LedgerFacts(
        enabled=True,
        url="postgresql+psycopg://ledger/gpucost",
        flush_interval_s=5.0,
        timezone="UTC",
        down_since=datetime(2026, 11, 29, 14, 2, 30, tzinfo=UTC),
        down_error="connection refused",
        unwritten_s=42.4,
        unwritten_micro=1234,
        tz=UTC,
    )
    document = status_document(inputs(ledger))
    assert codes(document) == ["ledger-unreachable"]
    assert document["warnings"][0]["message"] == (
        "The ledger is unreachable since 14:02 UTC; nothing lost yet; 42 s waiting to be written."
    )
    assert document["ledger"]["reachable"] is False
    assert document["ledger"]["unreachable_since"] == "2026-11-29T14:02:30+00:00"


def test_the_session_part_follows_the_meter_part_in_order() -> None:
    given = replace(
        inputs(LedgerFacts(enabled=False)),
        totals=LiveTotals(1_000_000, 2_500_000, 9_000_001),
    )
    document = status_document(given)
    assert list(document)[-18:] == [
        "warnings",
        "session_id",
        "today",
        "month",
        "all_time",
        "today_usd",
        "month_usd",
        "all_time_usd",
        "ledger",
        "carbon_intensity_g_per_kwh",
        "co2_g",
        "rightsizing",
        "rightsizing_note",
        "attribution",
        "budget",
        "machine",
        "metering",
        "bill",
    ]
    assert document["metering"]["state"] == "gpus"
    # no bill was reconciled for this machine
    assert document["bill"] is None
    assert (document["today_usd"], document["month_usd"], document["all_time_usd"]) == (
        1.0,
        2.5,
        9.000001,
    )
    # an hour at 200 W is 0.2 kWh: 100 g at 500 g/kWh
    assert document["co2_g"] == 100.0
    assert document["attribution"] == {"pids_visible": True, "note": None}
    assert document["budget"] == {"state": "ok"}


def test_the_machine_and_its_price_plan_are_described_in_the_server_s_language() -> None:
    from collections.abc import Iterator
    from contextlib import contextmanager

    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.core.instance_prices import AdminPrices, plan_prices
    from jupyter_gpucost.core.machine import Machine

    @contextmanager
    def language(name: str) -> Iterator[None]:
        i18n.set_language(name)  # as JupyterLab's language setting sets it
        try:
            yield
        finally:
            i18n.set_language("en")

    catalog = load_catalog()
    machine = Machine(
        "aws", instance_type="g5.xlarge", market="spot", shared=True, note="IMDS answered 403"
    )
    plan = plan_prices(
        AdminPrices(),
        provider="aws",
        instance_type="g5.xlarge",
        market="spot",
        shared=True,
        providers=catalog.providers,
        rows=(),
    )
    given = replace(
        inputs(LedgerFacts(enabled=False, error="disk full")), machine=machine, plan=plan
    )
    with language("zh_CN"):
        document = status_document(given)
    shown = document["machine"]
    warnings = {w["code"]: w["message"] for w in document["warnings"]}
    # what the tooltip and the panel show, in Chinese: nothing English but names and codes
    assert warnings["instance-unpriced"] == (
        "机器：此服务器运行在 Kubernetes Pod 中：按单 GPU 价格计价。"  # noqa: RUF001
    )
    assert warnings["ledger-unavailable"].startswith("没有账本（disk full）")  # noqa: RUF001
    assert shown["price_note"] == "此服务器运行在 Kubernetes Pod 中：按单 GPU 价格计价"  # noqa: RUF001
    assert shown["label"] == "g5.xlarge, spot（已检测）"  # noqa: RUF001
    assert shown["note"] == (
        "仅根据其 DMI 字段识别：其元数据服务未按文档所述应答（IMDS answered 403）"  # noqa: RUF001
    )
    # the server's language back to English: English again
    document = status_document(given)
    assert {w["message"] for w in document["warnings"]} >= {
        "Machine: this server runs in a Kubernetes pod: per-GPU prices."
    }
    assert document["machine"]["label"] == "g5.xlarge, spot (detected)"


def test_why_there_is_no_telemetry_is_said_in_the_server_s_language() -> None:
    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.telemetry.nvml_codes import ERR_LIBRARY_NOT_FOUND, INIT_REASONS

    telemetry = TelemetryStatus(
        source="nvml", simulated=False, available=False, reason=INIT_REASONS[ERR_LIBRARY_NOT_FOUND]
    )
    given = replace(inputs(LedgerFacts(enabled=False)), telemetry=telemetry)
    i18n.set_language("zh_CN")  # as JupyterLab's language setting sets it
    try:
        document = status_document(given)
    finally:
        i18n.set_language("en")
    # what the panel's banner "No GPU telemetry: %1" fills in
    assert document["telemetry"]["reason"] == "未找到 libnvidia-ml.so：此机器上没有 NVIDIA 驱动"  # noqa: RUF001
    english = status_document(given)["telemetry"]["reason"]
    assert english == "libnvidia-ml.so not found: no NVIDIA driver on this machine"
