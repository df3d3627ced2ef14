"""The hub's reconciliation with the cloud's FOCUS bill: the node each session ran on and
its ``providerID`` kept in the hub ledger (old ledgers too), each node's billed cost
allocated per day to the users by their share of its GPUs × time, the rest unallocated,
and ``python -m jupyter_gpucost.hub reconcile`` on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import tempfile
import threading
import time
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import sqlalchemy as sa
from focus_bills import EC2_G5, SAMPLES, StandIn, day_start, hourly_rows, write_csv
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hub_placement import G5_PROVIDER_ID, two_users

from jupyter_gpucost.core.focus import BilledMachine
from jupyter_gpucost.core.money import round_micro
from jupyter_gpucost.hub.app import GpuCostHub
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.placement import Placement, PlacementLedger
from jupyter_gpucost.hub.ledger.reconciled import ReconciledLedger
from jupyter_gpucost.hub.model import GpuAllocation, HubConfigError, Rate, ServerInfo
from jupyter_gpucost.hub.reconcile import schedule
from jupyter_gpucost.hub.reconcile.allocate import (
    GPUS_UNKNOWN,
    NOT_HOURS,
    NodeSpan,
    allocate,
    largest_remainder,
)
from jupyter_gpucost.hub.reconcile.command import main, notes
from jupyter_gpucost.hub.reconcile.nodes import billed_machine
from jupyter_gpucost.hub.reconcile.run import Outcome, catalog_gpus
from jupyter_gpucost.hub.reconcile.schedule import ScheduledBill
from jupyter_gpucost.hub.reconcile.traits import FocusSettings
from jupyter_gpucost.reconcile.read import BillError, BillRow, read_bill

DAY = "2026-11-24"
T = day_start(DAY)
#: what the stand-in's bill says an hour cost (1.006 × 0.72)
HOUR_MICRO = 724_320


# -- the command ------------------------------------------------------------------------


def bill_folder(tmp_path: Path) -> Path:
    """The g5's hours 08:00–14:00, a row of an instance the hub never ran on, the real
    samples, and one row twice."""
    folder = tmp_path / "bill"
    rows = hourly_rows(EC2_G5, T + timedelta(hours=8), 6)
    forged = replace(EC2_G5, resource_id="i-0ffffffffffffffff")
    write_csv(folder / "2026-11" / "part-0.csv", [*rows, rows[0], *hourly_rows(forged, T, 24)])
    for sample in SAMPLES[:2]:
        (folder / "samples").mkdir(parents=True, exist_ok=True)
        (folder / "samples" / sample.name).write_bytes(sample.read_bytes())
    return folder


def run(url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*args, "--ledger", url], lambda _config: (url, "UTC"), out, err)
    return code, out.getvalue(), err.getvalue()


def kept(url: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT day, kind, name, billed_micro_usd, estimated_micro_usd "
                "FROM hub_reconciled ORDER BY day, kind, name"
            )
        ).all()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_two_users_get_their_share_and_the_idle_hours_stay_unallocated(
    ledger_url: str, tmp_path: Path
) -> None:
    two_users(ledger_url).close()
    folder = bill_folder(tmp_path)
    code, out, err = run(ledger_url, str(folder), "--json")
    assert code == 0, err
    document = json.loads(out)
    (day,) = document["days"]
    assert day["date"] == DAY
    # six hours billed; alice and bob each held half the GPU for two hours
    assert day["billed"] == 6 * HOUR_MICRO / 1e6
    users = {u["user"]: u for u in day["users"]}
    assert users["alice"]["billed"] == users["bob"]["billed"] == HOUR_MICRO / 1e6
    # the hub's own price: two hours at 0.503 $/h (half of the g5's list price)
    assert users["alice"]["estimated"] == 1.006
    assert day["unallocated"] == 4 * HOUR_MICRO / 1e6
    assert day["unallocated_nodes"] == [
        {
            "resource_id": EC2_G5.resource_id,
            "billed": 4 * HOUR_MICRO / 1e6,
            "nodes": ["gpu-1"],
            "reason": "",
        }
    ]
    assert document["notes"] == []
    assert day["accuracy"] == round(2.012 / 4.34592, 4)
    # carol's node has no cloud: no bill, said so; the forged instance is nobody's
    assert "carol" not in users
    assert document["unnamed_nodes"] == ["kind-1"]
    assert document["rows"]["duplicates"] == 1
    rows = kept(ledger_url)
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("unallocated", EC2_G5.resource_id, 4 * HOUR_MICRO),
        ("user", "alice", HOUR_MICRO),
        ("user", "bob", HOUR_MICRO),
    ]
    # the same bill again: the same rows, nothing added
    assert run(ledger_url, str(folder))[0] == 0
    assert kept(ledger_url) == rows
    code, text, _ = run(ledger_url, str(folder))
    assert "unallocated (idle nodes)" in text
    assert "alice" in text


def test_a_node_of_unknown_size_is_left_unallocated_and_the_command_says_why(
    ledger_url: str, tmp_path: Path
) -> None:
    # alice's profile names a GPU but not the instance: the node's size is not known
    ledger = HubLedger(ledger_url)
    started = T + timedelta(hours=9)
    one_gpu = Rate(GpuAllocation("A10G", 1), Decimal("1.006"), "test price")
    opened = ledger.open_server(ServerInfo("alice", "", started, True, profile="gpu"), one_gpu)
    ledger.close_server(opened.server_id, started + timedelta(hours=2))
    ledger.flush(T + timedelta(hours=13))
    PlacementLedger(ledger.engine).record(
        [Placement(opened.server_id, "alice", "gpu-1", G5_PROVIDER_ID, started)]
    )
    ledger.close()
    folder = bill_folder(tmp_path)
    code, out, err = run(ledger_url, str(folder), "--json")
    assert code == 0, err
    document = json.loads(out)
    (day,) = document["days"]
    # alice is billed nothing of it; the node's six billed hours are all unallocated
    assert [u["billed"] for u in day["users"]] == [0]
    assert day["unallocated"] == 6 * HOUR_MICRO / 1e6
    (node,) = day["unallocated_nodes"]
    assert node["reason"] == "gpus_unknown"
    note = "node gpu-1: its GPU count is not known; its cost is left unallocated"
    assert document["notes"] == [note]
    code, text, _ = run(ledger_url, str(folder))
    assert code == 0
    assert note in text


def test_a_revised_bill_replaces_and_a_bad_one_changes_nothing(
    ledger_url: str, tmp_path: Path
) -> None:
    two_users(ledger_url).close()
    folder = bill_folder(tmp_path)
    assert run(ledger_url, str(folder))[0] == 0
    before = kept(ledger_url)
    # a later file revises the 10:00 hour (a credit): it replaces the hour, never adds
    revised = hourly_rows(EC2_G5, T + timedelta(hours=10), 1)
    revised[0].update(BilledCost="0.5")
    write_csv(folder / "2026-11" / "part-1.csv", revised)
    code, out, err = run(ledger_url, str(folder), "--json")
    assert code == 0, err
    (day,) = json.loads(out)["days"]
    assert day["billed"] == round((5 * HOUR_MICRO + 500_000) / 1e6, 6)
    users = {u["user"]: u["billed"] for u in day["users"]}
    # half of one of the old hours each, and half of the revised 10:00 hour each
    assert users["alice"] == users["bob"] == round((HOUR_MICRO // 2 + 250_000) / 1e6, 6)
    assert len(kept(ledger_url)) == len(before)
    after = kept(ledger_url)
    # a file that is not FOCUS: refused by name, the ledger as it was
    (folder / "2026-11" / "part-2.csv").write_text("a,b\n1,2\n")
    code, _, err = run(ledger_url, str(folder))
    assert code == 4
    assert "part-2.csv is not a FOCUS export" in err
    assert "nothing was kept" in err
    assert kept(ledger_url) == after
    # nor a bill in another currency
    (folder / "2026-11" / "part-2.csv").unlink()
    euro = hourly_rows(replace(EC2_G5, currency="EUR"), T + timedelta(hours=20), 1)
    write_csv(folder / "2026-11" / "part-3.csv", euro)
    code, _, err = run(ledger_url, str(folder))
    assert code == 4
    assert "EUR" in err
    assert kept(ledger_url) == after


def test_a_ledger_that_cannot_be_opened_is_said(tmp_path: Path) -> None:
    code, _, err = run("nosuchdb://x", str(tmp_path))
    assert code == 6
    assert "cannot" in err


# -- the allocation ----------------------------------------------------------------------


NODE = "gpu-1"
MACHINE = BilledMachine(provider="aws", instance_id=EC2_G5.resource_id)


def row(hour: int, billed: str, resource_id: str = EC2_G5.resource_id) -> BillRow:
    start = T + timedelta(hours=hour)
    return BillRow(
        resource_id,
        start,
        start + timedelta(hours=1),
        Decimal(billed),
        Decimal(billed),
        Decimal(billed),
        "USD",
        ("Usage", "", "SKU"),
    )


def span(user: str, start_h: float, end_h: float, gpus: Fraction, node: str = NODE) -> NodeSpan:
    return NodeSpan(
        user,
        node,
        T + timedelta(hours=start_h),
        T + timedelta(hours=end_h),
        gpus,
        0,
        Fraction(1),
    )


def test_a_mig_slice_pays_its_slice_and_the_rest_of_the_node_is_unallocated() -> None:
    # an 8-GPU node, one pod with a 1/7 MIG slice of one GPU: 1/56 of the node
    spans = [replace(span("alice", 0, 1, Fraction(1, 7)), node_gpus=8)]
    (day,) = allocate([row(0, "56")], {NODE: MACHINE}, spans, T + timedelta(days=5))
    assert day.billed == {"alice": 1_000_000}
    assert day.unallocated == {EC2_G5.resource_id: 55_000_000}
    assert day.settled


def test_a_node_whose_gpu_count_is_not_known_is_left_unallocated_not_guessed() -> None:
    # the profile does not say the instance's GPUs: one user holding 1 GPU of what may be
    # an 8-GPU node is never billed the whole node
    spans = [span("alice", 0, 2, Fraction(1)), span("bob", 1, 2, Fraction(0))]
    (day,) = allocate([row(0, "8"), row(1, "8")], {NODE: MACHINE}, spans, T)
    assert not any(day.billed.values())
    assert day.estimated["alice"] == 2_000_000
    assert day.unallocated == {EC2_G5.resource_id: 16_000_000}
    node = day.nodes[EC2_G5.resource_id]
    assert node.reason == GPUS_UNKNOWN
    assert node.nodes == (NODE,)
    # the same with the instance's 8 GPUs known: alice pays her eighth of her two hours
    sized = [replace(s, node_gpus=8) for s in spans]
    (day,) = allocate([row(0, "8"), row(1, "8")], {NODE: MACHINE}, sized, T)
    assert day.billed == {"alice": 2_000_000, "bob": 0}
    assert day.unallocated == {EC2_G5.resource_id: 14_000_000}
    assert day.nodes[EC2_G5.resource_id].reason == ""


def test_the_node_s_gpus_come_from_the_catalog_by_the_profile_s_instance_type() -> None:
    gpus = catalog_gpus()
    assert gpus["p4d.24xlarge"] == 8
    assert gpus["g5.xlarge"] == 1
    assert gpus["Standard_NC6s_v3"] == 1


def test_largest_remainder_adds_up_exactly() -> None:
    parts = {"a": Fraction(1, 3), "b": Fraction(1, 3), "c": Fraction(1, 3)}
    assert largest_remainder(1, parts) == {"a": 1, "b": 0, "c": 0}


users = st.sampled_from(["alice", "bob", "carol"])
nodes = st.sampled_from(["gpu-1", "gpu-2"])
spans_st = st.lists(
    st.builds(
        lambda u, n, s, length, g, k: replace(
            span(u, s / 4, (s + length) / 4, Fraction(g, 2), n), node_gpus=k
        ),
        users,
        nodes,
        st.integers(0, 95),
        st.integers(1, 48),
        st.integers(0, 4),
        st.sampled_from([0, 4]),
    ),
    max_size=8,
)
amounts = st.decimals(min_value=Decimal("-5"), max_value=Decimal("50"), places=7)
rows_st = st.lists(
    st.builds(
        lambda h, a, rid: row(h, str(a), rid),
        st.integers(0, 47),
        amounts,
        st.sampled_from([EC2_G5.resource_id, "i-0bbbbbbbbbbbbbbbb", "i-0ffffffffffffffff"]),
    ),
    max_size=12,
)
NODES = {
    "gpu-1": MACHINE,
    "gpu-2": BilledMachine(provider="aws", instance_id="i-0bbbbbbbbbbbbbbbb"),
}


def exact_billed(rows: list[BillRow], day: object) -> dict[str, int]:
    """Each node's billed micro-dollars of a day, as the bill says them."""
    sums: dict[str, Fraction] = {}
    for r in rows:
        if r.start.date() == day and r.resource_id != "i-0ffffffffffffffff":
            sums[r.resource_id] = sums.get(r.resource_id, Fraction(0)) + Fraction(r.billed)
    from jupyter_gpucost.core.money import round_micro

    return {k: round_micro(v * 1_000_000) for k, v in sums.items()}


@settings(max_examples=150, deadline=None)
@given(rows_st, spans_st)
def test_allocated_and_unallocated_add_up_to_the_bill_exactly(
    rows: list[BillRow], spans: list[NodeSpan]
) -> None:
    days = allocate(rows, NODES, spans, T + timedelta(days=9))
    for day in days:
        assert day.billed_total == sum(exact_billed(rows, day.day).values())
    # a forged row (an instance no node is) is nobody's
    forged = [r for r in rows if r.resource_id == "i-0ffffffffffffffff"]
    assert allocate([r for r in rows if r not in forged], NODES, spans, T) == allocate(
        rows, NODES, spans, T
    )


@settings(max_examples=150, deadline=None)
@given(rows_st, spans_st)
def test_no_user_is_billed_for_a_node_they_never_ran_on(
    rows: list[BillRow], spans: list[NodeSpan]
) -> None:
    only_gpu_1 = [r for r in rows if r.resource_id == EC2_G5.resource_id]
    for day in allocate(only_gpu_1, NODES, spans, T):
        on_it = {s.user for s in spans if s.node == "gpu-1" and s.gpus}
        assert {u for u, v in day.billed.items() if v} <= on_it
    # nor for an hour they were not on it: a bill of the hours no span covers is unallocated
    covered = {
        h
        for s in spans
        if s.node == "gpu-1"
        for h in range(48)
        if s.start < T + timedelta(hours=h + 1) and s.end > T + timedelta(hours=h)
    }
    idle = [r for r in only_gpu_1 if (r.start - T) // timedelta(hours=1) not in covered]
    for day in allocate(idle, NODES, spans, T):
        assert not any(day.billed.values())


TRUE_GPUS = 4


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.builds(lambda h, a: row(h, str(a)), st.integers(0, 47), amounts.map(abs)), max_size=12
    ),
    spans_st,
    st.booleans(),
)
def test_no_user_is_billed_above_their_share_of_the_node_s_true_gpu_time(
    rows: list[BillRow], spans: list[NodeSpan], known: bool
) -> None:
    # the node truly has TRUE_GPUS GPUs; the profiles say so, or say nothing
    spans = [replace(s, node="gpu-1", node_gpus=TRUE_GPUS if known else 0) for s in spans]
    for day in allocate(rows, NODES, spans, T):
        for user, got in day.billed.items():
            bound = Fraction(0)
            for r in rows:
                if r.start.date() != day.day:
                    continue
                mine = sum(
                    (
                        s.gpus
                        * max(0.0, (min(s.end, r.end) - max(s.start, r.start)).total_seconds())
                        for s in spans
                        if s.user == user
                    ),
                    Fraction(0),
                )
                bound += Fraction(r.billed) * 1_000_000 * Fraction(mine) / (TRUE_GPUS * 3600)
            # whole micro-dollars: at most one more than the exact share
            assert got <= bound + 1
            if not known:
                assert got == 0


hour_amounts = st.dictionaries(st.integers(0, 47), amounts, max_size=6)


@settings(max_examples=25, deadline=None)
@given(hour_amounts, hour_amounts, spans_st)
def test_duplicated_and_revised_rows_count_once(
    first: dict[int, Decimal], revisions: dict[int, Decimal], spans: list[NodeSpan]
) -> None:
    def rows_of(amounts: dict[int, Decimal]) -> list[dict[str, str]]:
        found = []
        for hour, amount in sorted(amounts.items()):
            (one,) = hourly_rows(EC2_G5, T + timedelta(hours=hour), 1)
            one.update(BilledCost=str(amount))
            found.append(one)
        return found

    with tempfile.TemporaryDirectory() as folder:
        # every row twice in the first file; a later file revises some hours
        write_csv(Path(folder) / "part-0.csv", rows_of(first) * 2)
        write_csv(Path(folder) / "part-1.csv", rows_of(revisions))
        bill = read_bill(folder, MACHINE.last_parts())
    expected = [row(h, str(a)) for h, a in sorted({**first, **revisions}.items())]
    got = allocate(bill.rows, NODES, spans, T)
    want = allocate(expected, NODES, spans, T)
    assert [(d.day, d.billed, d.unallocated) for d in got] == [
        (d.day, d.billed, d.unallocated) for d in want
    ]


def test_the_kept_lines_replace_the_nodes_days_they_cover(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    kept_ = ReconciledLedger(ledger.engine)
    # both nodes are g5.xlarge: one GPU each
    alice = [
        replace(span("alice", 0, 1, Fraction(1)), node_gpus=1),
        replace(span("bob", 0, 1, Fraction(1), "gpu-2"), node_gpus=1),
    ]
    (day,) = allocate([row(0, "2")], NODES, alice, T)
    covered = [(day.day, rid) for rid in day.nodes]
    kept_.replace(covered, day.lines(), T + timedelta(days=1), T)
    kept_.replace(covered, day.lines(), T + timedelta(days=1), T)
    # alice used the whole node that hour: its unallocated part is 0, and said
    assert [(line.name, line.billed_micro_usd) for line in kept_.read().lines] == [
        ("alice", 2_000_000),
        (EC2_G5.resource_id, 0),
    ]
    assert kept_.read().bill_to == T + timedelta(days=1)
    # another bill, of the other node the same day: the first node's lines stay
    (other,) = allocate([row(0, "3", "i-0bbbbbbbbbbbbbbbb")], NODES, alice, T)
    kept_.replace([(other.day, rid) for rid in other.nodes], other.lines(), T, T)
    assert [(line.name, line.billed_micro_usd) for line in kept_.read().lines] == [
        ("alice", 2_000_000),
        ("bob", 3_000_000),
        (EC2_G5.resource_id, 0),
        ("i-0bbbbbbbbbbbbbbbb", 0),
    ]
    ledger.close()


# -- the service's scheduled read ---------------------------------------------------------


def test_the_scheduled_read_keeps_the_bill_and_logs_a_bad_one(
    ledger_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    two_users(ledger_url).close()
    folder = bill_folder(tmp_path)
    engine = sa.create_engine(ledger_url)
    bill = ScheduledBill(FocusSettings(str(folder), 300), engine)
    asyncio.run(bill.step())
    good = kept(ledger_url)
    assert [r[2] for r in good] == [EC2_G5.resource_id, "alice", "bob"]
    # a damaged file: logged by name, never raised, the ledger as it was
    (folder / "2026-11" / "part-9.csv").write_text("a,b\n1,2\n")
    with caplog.at_level(logging.ERROR, "jupyter_gpucost.hub"):
        asyncio.run(bill.step())
    assert "part-9.csv is not a FOCUS export" in caplog.text
    assert "nothing kept" in caplog.text
    assert kept(ledger_url) == good
    engine.dispose()


def test_the_focus_settings_are_off_by_default_and_checked() -> None:
    assert GpuCostHub().focus_settings() is None
    on = GpuCostHub(focus_source=" s3://billing/focus/ ").focus_settings()
    assert on == FocusSettings("s3://billing/focus/", 86_400.0)
    assert on.timeout_s == 3_600
    with pytest.raises(HubConfigError, match=r"focus_interval_s = 10 is not valid"):
        GpuCostHub(focus_source="bill.csv", focus_interval_s=10).focus_settings()


def test_a_slow_read_is_given_up_and_the_next_one_waits_for_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    reads: list[str] = []

    def slow(engine: object, source: str) -> object:
        reads.append(source)
        release.wait(30)
        raise BillError("stopped")

    monkeypatch.setattr(schedule, "reconcile", slow)
    bill = ScheduledBill(FocusSettings("s3://billing/focus/", 0.2), sa.create_engine("sqlite://"))

    async def twice() -> float:
        started = time.monotonic()
        await bill.step()  # given up after 0.2 s: the service goes on
        await bill.step()  # the first still runs: this one does not start another
        return time.monotonic() - started

    with caplog.at_level(logging.INFO, "jupyter_gpucost.hub"):
        assert asyncio.run(twice()) < 5
    release.set()
    assert reads == ["s3://billing/focus/"]
    assert "no answer in 0 s" in caplog.text
    assert "the previous read of s3://billing/focus/ still runs" in caplog.text


# -- AKS: a node pool is one virtual machine scale set on the bill ------------------------

#: an AKS node pool of Standard_NC6s_v3 (one V100 each) in eastus, as Azure's FOCUS export
#: names it: the scale set's resource id, in lower case
AKS_SET = StandIn(
    "Microsoft",
    "/subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourcegroups/mc_testshack_aksgpu_eastus"
    "/providers/microsoft.compute/virtualmachinescalesets/aks-gpunp-10282168-vmss",
    "Standard_NC6s_v3",
    "eastus",
    Decimal("3.06"),
    Decimal("1"),
)
#: each node's providerID as the cloud controller writes it (the resource group's case kept)
AKS_NODES = {
    f"aks-gpunp-10282168-vmss00000{n}": billed_machine(
        "azure:///subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourceGroups/"
        "MC_testshack_aksgpu_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/"
        f"aks-gpunp-10282168-vmss/virtualMachines/{n}"
    )
    for n in range(2)
}
NODE_0, NODE_1 = sorted(AKS_NODES)


def aks_nodes() -> dict[str, BilledMachine]:
    return {n: m for n, m in AKS_NODES.items() if m is not None}


def set_day(instance_hours: str, unit: str = "Hours") -> dict[str, str]:
    """The scale set's row of a day, as Azure's export writes it: the day's charge for all
    its instances, ConsumedQuantity their instance-hours."""
    (one,) = hourly_rows(AKS_SET, T, 1)
    cost = str(AKS_SET.list_per_hour * Decimal(instance_hours))
    one.update(
        ChargePeriodEnd=(T + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        ChargeDescription="NCv3 Series - NC6s v3 - US East",
        BilledCost=cost,
        EffectiveCost=cost,
        ListCost=cost,
        ConsumedQuantity=instance_hours,
        ConsumedUnit=unit,
        PricingQuantity=instance_hours,
        PricingUnit="1 Hour" if unit == "Hours" else unit,
        ServiceName="Virtual Machines",
        ResourceType="Virtual machine scale set",
    )
    return one


def v100(user: str, node: str, start_h: float, end_h: float) -> NodeSpan:
    return replace(span(user, start_h, end_h, Fraction(1), node), node_gpus=1)


def test_a_scale_set_s_day_is_shared_by_its_instance_hours(tmp_path: Path) -> None:
    # two instances all day: 48 instance-hours of one V100 each; alice 2 h on node 0,
    # bob 3 h on node 1
    path = write_csv(tmp_path / "bill" / "part-0.csv", [set_day("48")])
    nodes = aks_nodes()
    bill = read_bill(str(path.parent), {p for m in nodes.values() for p in m.last_parts()})
    (charge,) = bill.rows
    assert (charge.quantity, charge.unit) == (Decimal("48"), "Hours")
    spans = [v100("alice", NODE_0, 9, 11), v100("bob", NODE_1, 10, 13)]
    (day,) = allocate(bill.rows, nodes, spans, T)
    assert day.billed == {"alice": 6_120_000, "bob": 9_180_000}
    set_id = nodes[NODE_0].key
    assert set_id.lower() == AKS_SET.resource_id
    assert day.unallocated == {set_id: 146_880_000 - 15_300_000}
    assert day.nodes[set_id].nodes == (NODE_0, NODE_1)
    assert day.nodes[set_id].reason == ""


def test_a_scale_set_row_not_in_hours_is_left_unallocated_and_said(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "bill" / "part-0.csv", [set_day("2", unit="Days")])
    nodes = aks_nodes()
    bill = read_bill(str(path.parent), {p for m in nodes.values() for p in m.last_parts()})
    (day,) = allocate(bill.rows, nodes, [v100("alice", NODE_0, 9, 11)], T)
    set_id = nodes[NODE_0].key
    assert not any(day.billed.values())
    assert day.unallocated == {set_id: 6_120_000}
    assert day.nodes[set_id].reason == NOT_HOURS
    outcome = Outcome([day], bill, nodes)
    assert notes(outcome) == [
        f"node {NODE_0}, {NODE_1}: the bill does not say its scale set's instance-hours; "
        "its cost is left unallocated"
    ]
    # nor is a set of unknown size guessed
    unknown = [replace(v100("alice", NODE_0, 9, 11), node_gpus=0)]
    path = write_csv(tmp_path / "bill" / "part-0.csv", [set_day("48")])
    bill = read_bill(str(path.parent), {p for m in nodes.values() for p in m.last_parts()})
    (day,) = allocate(bill.rows, nodes, unknown, T)
    assert day.nodes[set_id].reason == GPUS_UNKNOWN
    assert not any(day.billed.values())


def set_row(hour: int, hours: int, billed: Decimal, unit: str) -> BillRow:
    start = T + timedelta(hours=hour)
    return BillRow(
        AKS_SET.resource_id,
        start,
        start + timedelta(hours=hours),
        billed,
        billed,
        billed,
        "USD",
        ("Usage", "", f"SKU-{hour}-{hours}"),
        Decimal(hours * 2),
        unit,
    )


set_spans = st.lists(
    st.builds(
        lambda u, n, s, length, g: replace(
            span(u, s / 4, (s + length) / 4, Fraction(g, 2), n), node_gpus=4
        ),
        users,
        st.sampled_from([NODE_0, NODE_1]),
        st.integers(0, 95),
        st.integers(1, 48),
        st.integers(0, 8),
    ),
    max_size=8,
)
set_rows = st.lists(
    st.builds(
        set_row,
        st.integers(0, 40),
        st.sampled_from([1, 24]),
        amounts.map(abs),
        st.sampled_from(["Hours", "1 Hour", "GB"]),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(set_rows, set_spans)
def test_a_scale_set_s_bill_is_allocated_exactly_and_no_user_above_their_share(
    rows: list[BillRow], spans: list[NodeSpan]
) -> None:
    nodes = aks_nodes()
    for day in allocate(rows, nodes, spans, T):
        (node,) = day.nodes.values()
        exact = sum((Fraction(r.billed) for r in rows if r.start.date() == day.day), Fraction(0))
        assert sum(node.billed.values()) + node.unallocated == round_micro(exact * 1_000_000)
        for user, got in node.billed.items():
            bound = Fraction(0)
            for r in rows:
                if r.start.date() != day.day or r.unit == "GB":
                    continue
                mine = sum(
                    (s.gpus * Fraction(_seconds(s, r)) for s in spans if s.user == user),
                    Fraction(0),
                )
                # capacity: the row's instance-hours × 4 GPUs each
                bound += (
                    Fraction(r.billed) * 1_000_000 * mine / (Fraction(r.quantity or 0) * 4 * 3600)
                )
            assert got <= bound + 1


def _seconds(s: NodeSpan, r: BillRow) -> float:
    return max(0.0, (min(s.end, r.end) - max(s.start, r.start)).total_seconds())


def test_the_command_shares_a_scale_set_s_bill_among_its_nodes_users(
    ledger_url: str, tmp_path: Path
) -> None:
    ledger = HubLedger(ledger_url)
    v100_rate = Rate(
        GpuAllocation("V100", 1, instance="Standard_NC6s_v3", instance_gpus=1),
        Decimal("3.06"),
        "test price",
    )
    places = []
    for user, node, start, hours in (("alice", NODE_0, 9, 2), ("bob", NODE_1, 10, 3)):
        started = T + timedelta(hours=start)
        opened = ledger.open_server(ServerInfo(user, "", started, True, profile="v100"), v100_rate)
        ledger.close_server(opened.server_id, started + timedelta(hours=hours))
        provider_id = (
            "azure:///subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourceGroups/"
            "MC_testshack_aksgpu_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/"
            f"aks-gpunp-10282168-vmss/virtualMachines/{node[-1]}"
        )
        places.append(Placement(opened.server_id, user, node, provider_id, started))
    ledger.flush(T + timedelta(hours=14))
    PlacementLedger(ledger.engine).record(places)
    ledger.close()
    write_csv(tmp_path / "bill" / "part-0.csv", [set_day("48")])
    code, out, err = run(ledger_url, str(tmp_path / "bill"), "--json")
    assert code == 0, err
    document = json.loads(out)
    (day,) = document["days"]
    assert {u["user"]: u["billed"] for u in day["users"]} == {"alice": 6.12, "bob": 9.18}
    assert day["billed"] == 146.88
    (idle,) = day["unallocated_nodes"]
    assert idle["billed"] == 131.58
    assert idle["nodes"] == [NODE_0, NODE_1]
    assert idle["resource_id"].lower() == AKS_SET.resource_id
    assert document["unnamed_nodes"] == []
    assert document["notes"] == []
