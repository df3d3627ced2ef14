"""Right-sizing advice waits for enough readings: none 17 s into a session."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from test_attribution import CATALOG, GIB, T0, gpu, meter

from jupyter_gpucost.core.billing import US_PER_S
from jupyter_gpucost.core.meter import MeterSnapshot
from jupyter_gpucost.core.rightsizing import MIN_OBSERVED_S, advise, why_not


def snapshot_after(seconds: int, util: float) -> MeterSnapshot:
    m = meter()
    readings = [replace(gpu(0, util, []), name="NVIDIA H100 80GB HBM3")]
    m.update(readings, 0, T0)
    return m.update(readings, seconds * US_PER_S, T0 + timedelta(seconds=seconds))


def test_no_advice_17_s_into_a_session_and_the_note_says_why() -> None:
    snap = snapshot_after(17, 5.0)
    assert (
        advise(
            snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
        )
        is None
    )
    note = why_not(snap)
    assert note is not None
    assert note.startswith("Too early to tell")
    assert "(17 s so far)" in note


def test_advice_once_the_gpus_were_observed_long_enough() -> None:
    from jupyter_gpucost.core import i18n

    early = snapshot_after(MIN_OBSERVED_S - 1, 5.0)
    assert (
        advise(
            early, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
        )
        is None
    )
    snap = snapshot_after(MIN_OBSERVED_S, 5.0)
    advice = advise(
        snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
    )
    assert advice is not None
    assert advice.model == "T4"
    assert why_not(snap) is None
    assert advice.reason.endswith("1× T4 at $0.526/h for the same billed time")
    i18n.set_language("zh_CN")  # as JupyterLab's language setting sets it
    try:
        advice = advise(
            snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
        )
    finally:
        i18n.set_language("en")
    assert advice is not None
    assert advice.reason.startswith("GPU 有 ")


def test_the_notes_the_panel_shows_are_in_the_servers_language() -> None:
    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.server.gpu_use.attribution import NOTE_SIMULATED

    i18n.set_language("zh_CN")
    try:
        note = why_not(snapshot_after(17, 5.0))
        busy = why_not(snapshot_after(MIN_OBSERVED_S + 60, 100.0))
        simulated = i18n._(NOTE_SIMULATED)
    finally:
        i18n.set_language("en")
    assert note == "尚无法判断：会话占用 GPU 满 5 分钟后才给出建议（目前 17 秒）。"  # noqa: RUF001
    assert busy is not None
    assert busy.startswith("GPU 有 100% 的时间在忙")
    assert simulated.startswith("模拟遥测")


def test_no_advice_from_a_price_that_is_only_an_upper_bound() -> None:
    # an unknown GPU is priced at the dearest of the catalog: "a T4 would have cost less"
    # would compare against a bound, not a price
    m = meter()
    readings = [replace(gpu(0, 5.0, []), name="Mystery Accelerator 9000")]
    m.update(readings, 0, T0)
    snap = m.update(readings, MIN_OBSERVED_S * US_PER_S, T0 + timedelta(seconds=MIN_OBSERVED_S))
    price = snap.gpus[0].price
    assert price is not None
    assert price.upper_bound
    assert (
        advise(
            snap, CATALOG, provider="aws", market="on-demand", region="us-east-1", peak_bytes=GIB
        )
        is None
    )
