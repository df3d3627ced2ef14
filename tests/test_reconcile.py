"""``jupyter gpucost reconcile``: the cloud's FOCUS bill beside the ledger's estimate, read
from the real sample rows and from bills of the tests' own machines, as a folder, Parquet
and from S3; bad bills refused by name with the ledger untouched."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, serve, write_dmi
from cloud_standins import StandIn as StandIn_
from focus_bills import (
    AZURE_NC,
    EC2_G5,
    GCP_A2,
    SAMPLES,
    StandIn,
    day_start,
    hourly_rows,
    write_csv,
    write_parquet,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.reconcile.cli import main
from jupyter_gpucost.reconcile.read import read_bill
from jupyter_gpucost.server.ledger import Ledger

#: the stand-in machines as the ledger recorded them (detected at the server's start)
MACHINES = {
    EC2_G5: Machine(
        "aws", instance_type="g5.xlarge", region="us-east-1", instance_id=EC2_G5.resource_id
    ),
    AZURE_NC: Machine(
        "azure",
        instance_type="Standard_NC24ads_A100_v4",
        region="eastus",
        instance_id="0f8fad5b-d9cb-469f-a165-70867728950e",
        name="nc-a100-1",
        resource_group="rg-ml",
        subscription_id="8f6c2d1e-0000-4000-8000-000000000042",
    ),
    GCP_A2: Machine(
        "gcp",
        instance_type="a2-highgpu-1g",
        region="us-central1",
        instance_id="4520031799277581760",
        name="train-a2",
        project="my-project",
        zone="us-central1-a",
    ),
}
DAY = "2026-11-24"
LATER = "2026-11-26"
#: the ledger's estimate: two hours at list price, 10:00-12:00 UTC on DAY
SESSION_START = day_start(DAY) + timedelta(hours=10)


def micro_per_minute(machine: StandIn) -> int:
    return int(machine.list_per_hour * 1_000_000 / 60)


def ledger_with_sessions(tmp_path: Path, url: str | None = None) -> str:
    """A ledger (SQLite in ``tmp_path`` unless ``url`` names one) with a two-hour session
    on each stand-in machine."""
    url = url or f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    ledger = Ledger(url)
    for n, (standin, machine) in enumerate(MACHINES.items()):
        session = f"session-{n}"
        start = SESSION_START.timestamp()
        spend = [(int(start) + 60 * m, micro_per_minute(standin), 0, 0) for m in range(120)]
        ledger.add_run(session, SESSION_START, SESSION_START + timedelta(hours=2), None, spend, [])
        ledger.record_machine(session, machine, "USD")
    ledger.close()
    return url


def bill_rows(standin: StandIn) -> list[dict[str, str]]:
    return hourly_rows(standin, day_start(DAY), 24) + hourly_rows(standin, day_start(LATER), 24)


def folder_bill(tmp_path: Path) -> Path:
    """The real samples and the stand-ins' rows, in CSV and CSV.gz, in one folder."""
    folder = tmp_path / "bill"
    folder.mkdir(parents=True)
    for sample in SAMPLES:
        shutil.copy(sample, folder / sample.name)
    write_csv(folder / "aws" / "part-0.csv.gz", bill_rows(EC2_G5), gz=True)
    write_csv(folder / "azure" / "part-0.csv", bill_rows(AZURE_NC))
    write_csv(folder / "gcp" / "part-0.csv", bill_rows(GCP_A2))
    return folder


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def by_machine(document: dict[str, object]) -> dict[str, dict[str, object]]:
    machines = document["machines"]
    assert isinstance(machines, list)
    return {m["resource_id"]: m for m in machines}


def reconciled_rows(url: str) -> list[tuple[object, ...]]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("select * from reconciled order by resource_id, day")).all()
    engine.dispose()
    return [tuple(r) for r in rows]


# -- the real samples ---------------------------------------------------------------------


def test_the_real_samples_of_every_version_read_as_focus() -> None:
    for sample in SAMPLES:
        bill = read_bill(str(sample), {"no-such-machine"})
        assert bill.rows_read == bill.ignored > 0, sample.name
        assert bill.newest_end is not None


def test_a_real_ec2_instance_hour_of_the_foundation_s_sample_is_matched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "$0.34 per On Demand Linux c5.2xlarge Instance Hour", 2024-09-26 00:00-01:00 UTC
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    ledger = Ledger(url)
    start = datetime(2024, 9, 26, tzinfo=UTC)
    ledger.add_run(
        "s",
        start,
        start + timedelta(minutes=15),
        None,
        [(int(start.timestamp()), 85_000, 0, 0)],
        [],
    )
    ledger.record_machine(
        "s", Machine("aws", instance_type="c5.2xlarge", instance_id="i-081360af1l266l589"), "USD"
    )
    ledger.close()
    sample = next(p for p in SAMPLES if "1.0" in p.name)
    code, out, _ = run(capsys, str(sample), "--ledger", url, "--json")
    assert code == 0
    (machine,) = json.loads(out)["machines"]
    assert machine["resource_id"] == "i-081360af1l266l589"
    assert machine["days"] == [
        {
            "date": "2024-09-26",
            "estimated": 0.085,
            "billed": 0.34,
            "effective": 0.0,
            "list": 0.34,
            # the session was open for 15 minutes of the billed hour
            "no_session": 0.255,
            "ratio": 4.0,
            "settled": True,
        }
    ]


# -- the stand-in machines ----------------------------------------------------------------


def check_stand_ins(document: dict[str, object]) -> None:
    machines = by_machine(document)
    assert set(machines) == {
        EC2_G5.resource_id,
        # Azure and GCP are named as their exports name them, whatever the case
        "/subscriptions/8f6c2d1e-0000-4000-8000-000000000042/resourceGroups/rg-ml/providers/"
        "Microsoft.Compute/virtualMachines/nc-a100-1",
        "//compute.googleapis.com/projects/my-project/instances/train-a2",
    }
    ec2 = machines[EC2_G5.resource_id]
    assert ec2["provider"] == "aws"
    assert ec2["instance_type"] == "g5.xlarge"
    assert ec2["effective_rate"] == 0.72
    first, later = ec2["days"]
    assert first == {
        "date": DAY,
        "estimated": 2.01192,  # 120 minutes at 0.016766 (1.006/h)
        "billed": 17.38368,  # 24 hours at 0.72432
        "effective": 17.38368,
        "list": 24.144,
        "no_session": 15.93504,  # 22 hours with no session open
        "ratio": 8.6403,
        "settled": True,
    }
    # within 48 h of the newest charge: the cloud may still revise it
    assert later["date"] == LATER
    assert later["settled"] is False
    assert later["estimated"] == 0.0
    assert later["no_session"] == later["billed"]
    gcp = machines["//compute.googleapis.com/projects/my-project/instances/train-a2"]
    assert gcp["effective_rate"] == 0.9


def test_a_folder_of_csv_and_csv_gz_is_reconciled_and_kept(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    ledger_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # on a SQLite file and on a real PostgreSQL database
    url = ledger_with_sessions(tmp_path, ledger_url)
    folder = folder_bill(tmp_path)
    code, out, err = run(capsys, str(folder), "--ledger", url, "--json")
    assert code == 0, err
    document = json.loads(out)
    check_stand_ins(document)
    # the real samples' rows are for other resources: ignored and counted
    assert document["rows"]["ignored"] == sum(len(p.read_text().splitlines()) - 1 for p in SAMPLES)
    kept = reconciled_rows(url)
    assert len(kept) == 6
    # a second run replaces, never adds
    assert run(capsys, str(folder), "--ledger", url, "--json")[0] == 0
    again = reconciled_rows(url)
    assert [r[:13] for r in again] == [r[:13] for r in kept]
    # named from another folder, the same bill still replaces its rows
    monkeypatch.chdir(folder.parent)
    assert run(capsys, folder.name, "--ledger", url, "--json")[0] == 0
    assert [r[:13] for r in reconciled_rows(url)] == [r[:13] for r in kept]

    code, text, _ = run(capsys, str(folder), "--ledger", url)
    assert "billed while no notebook was open" in text
    assert "not settled" in text
    assert "$17.38" in text
    assert "$15.94" in text


def test_a_glob_and_the_since_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = ledger_with_sessions(tmp_path)
    folder = folder_bill(tmp_path)
    code, out, _ = run(capsys, f"{folder}/a*/*.csv.gz", "--ledger", url, "--json", "--since", LATER)
    assert code == 0
    (ec2,) = json.loads(out)["machines"]
    assert [d["date"] for d in ec2["days"]] == [LATER]


def test_parquet_as_the_clouds_write_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = ledger_with_sessions(tmp_path)
    rows = bill_rows(EC2_G5) + bill_rows(AZURE_NC) + bill_rows(GCP_A2)
    random.Random(7).shuffle(rows)
    path = write_parquet(tmp_path / "bill" / "focus.parquet", rows)
    code, out, err = run(capsys, str(path), "--ledger", url, "--json")
    assert code == 0, err
    check_stand_ins(json.loads(out))


def test_a_bill_in_s3(tmp_path: Path, capsys: pytest.CaptureFixture[str], s3_endpoint: str) -> None:
    import boto3

    url = ledger_with_sessions(tmp_path)
    folder = folder_bill(tmp_path)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bills")
    for path in folder.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), "bills", f"focus/{path.relative_to(folder)}")
    code, out, err = run(
        capsys,
        "s3://bills/focus/",
        "--ledger",
        url,
        "--json",
        "--storage-option",
        f"endpoint_url={s3_endpoint}",
    )
    assert code == 0, err
    check_stand_ins(json.loads(out))


# -- bad bills ----------------------------------------------------------------------------


def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, source: Path, *words: str) -> str:
    url = ledger_with_sessions(tmp_path)
    good = folder_bill(tmp_path / "good")
    assert run(capsys, str(good), "--ledger", url)[0] == 0
    before = reconciled_rows(url)
    code, _, err = run(capsys, str(source), "--ledger", url)
    assert code == 4
    for word in words:
        assert word in err
    assert "nothing was kept" in err
    assert reconciled_rows(url) == before
    return err


def test_a_file_that_is_not_focus_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad" / "usage.csv"
    bad.parent.mkdir()
    bad.write_text("lineItem/ResourceId,lineItem/UnblendedCost\ni-0a5b7c9d1e3f50000,1.0\n")
    refused(capsys, tmp_path, bad, "usage.csv", "not a FOCUS export", "BilledCost")


def test_another_currency_than_the_ledger_s_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    euros = StandIn(**{**EC2_G5.__dict__, "currency": "EUR"})
    bad = write_csv(tmp_path / "bad" / "eur.csv", hourly_rows(euros, day_start(DAY), 3))
    refused(capsys, tmp_path, bad, "EUR", "USD")


@pytest.mark.parametrize("gz", [False, True])
def test_a_truncated_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gz: bool
) -> None:
    whole = write_csv(tmp_path / "w" / "bill.csv", bill_rows(EC2_G5)).read_bytes()
    cut = whole[: len(whole) * 2 // 3]
    bad = tmp_path / "bad" / ("bill.csv.gz" if gz else "bill.csv")
    bad.parent.mkdir()
    bad.write_bytes(gzip.compress(whole)[: len(gzip.compress(whole)) * 2 // 3] if gz else cut)
    refused(capsys, tmp_path, bad, "bill.csv", "cannot be read to its end")


def test_duplicates_count_once_and_a_revision_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ledger_with_sessions(tmp_path)
    rows = hourly_rows(EC2_G5, day_start(DAY), 24)
    folder = tmp_path / "bill"
    write_csv(folder / "2026-11-25.csv", rows + rows[:5])
    # the next delivery revises the day: every hour at half the list price
    revised = hourly_rows(
        StandIn(**{**EC2_G5.__dict__, "discount": Decimal("0.5")}), day_start(DAY), 24
    )
    write_csv(folder / "2026-11-26.csv", revised)
    code, out, _ = run(capsys, str(folder), "--ledger", url, "--json")
    assert code == 0
    document = json.loads(out)
    (ec2,) = document["machines"]
    (day,) = ec2["days"]
    assert day["billed"] == 12.072  # 24 × 0.503, the revision only
    assert document["rows"]["duplicates"] == 5
    assert document["rows"]["revised"] == 24


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    hours=st.integers(min_value=1, max_value=30),
    repeats=st.lists(st.integers(min_value=0, max_value=29), max_size=15),
    seed=st.integers(min_value=0, max_value=1000),
    revise=st.booleans(),
)
def test_duplicates_order_and_revisions_never_change_the_sum(
    tmp_path_factory: pytest.TempPathFactory,
    hours: int,
    repeats: list[int],
    seed: int,
    revise: bool,
) -> None:
    folder = tmp_path_factory.mktemp("bill")
    rows = hourly_rows(EC2_G5, day_start(DAY), hours)
    noisy = rows + [rows[i % hours] for i in repeats]
    random.Random(seed).shuffle(noisy)
    write_csv(folder / "a.csv", noisy)
    expected = Decimal("0.724320") * hours
    if revise:
        half = StandIn(**{**EC2_G5.__dict__, "discount": Decimal("0.5")})
        write_csv(folder / "b.csv", hourly_rows(half, day_start(DAY), hours))
        expected = Decimal("0.503") * hours
    bill = read_bill(str(folder), {EC2_G5.resource_id})
    assert sum(r.billed for r in bill.rows) == expected
    assert len(bill.rows) == hours


# -- a real server's ledger ---------------------------------------------------------------


class TestARealServerOnAnEc2G5:
    """A server on a detected g5.xlarge (the EC2 metadata stand-in), metering simulated
    GPUs into its ledger; its bill read back into the status."""

    @pytest.fixture
    def standin(self) -> Iterator[StandIn_]:
        identity = {
            **Cloud().aws_identity,
            "instanceId": EC2_G5.resource_id,
            "instanceType": "g5.xlarge",
        }
        yield from serve(Cloud(aws_identity=identity))

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn_, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        # the status reads the reconciled bill at once (a minute apart otherwise)
        monkeypatch.setattr("jupyter_gpucost.server.ledger.bill.BILL_READ_EVERY_S", 0.0)
        return {
            "telemetry": "simulated",
            "simulated_trace": "h100-live",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": f"sqlite:///{tmp_path / 'ledger.sqlite'}",
            "ledger_flush_interval_s": 0.5,
        }

    async def test_its_bill_is_matched_kept_and_shown_in_the_status(
        self, jp_fetch: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"

        def metered() -> bool:
            try:
                return any(m.estimated for m in Ledger(url).machines())
            except Exception:
                return False

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if metered():
                break
            await asyncio.sleep(0.2)
        assert metered(), "the server wrote no cost of its machine to the ledger in 30 s"
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        # the bill: the hour the session runs in and the three before it (no notebook open)
        first = max(hour - timedelta(hours=3), hour.replace(hour=0))
        hours = int((hour - first).total_seconds() // 3600) + 1
        write_csv(tmp_path / "bill" / "focus.csv", hourly_rows(EC2_G5, first, hours))
        code, out, err = run(capsys, str(tmp_path / "bill"), "--ledger", url, "--json")
        assert code == 0, err
        (machine,) = json.loads(out)["machines"]
        assert machine["instance_type"] == "g5.xlarge"
        (day,) = machine["days"]
        assert day["date"] == now.date().isoformat()
        assert day["billed"] == round(0.72432 * hours, 6)
        assert day["estimated"] > 0
        # the hours before the server started were billed with no notebook open
        assert day["no_session"] >= round(0.72432 * (hours - 1), 6) - 1e-6
        assert day["settled"] is False

        async def bill() -> Any:
            status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
            return status["bill"]

        # the server reads the bill in a thread of its own, off its event loop
        deadline = time.monotonic() + 20
        shown = await bill()
        while shown is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            shown = await bill()
        assert shown is not None, "the status showed no bill in 20 s"
        bill = shown
        assert bill["billed_usd"] == day["billed"]
        to = (hour + timedelta(hours=1) - timedelta(microseconds=1)).date().isoformat()
        assert bill["to"] == to
        assert bill["text"].startswith("estimated $")
        assert bill["text"].endswith(f" · billed ${day['billed']:.2f} (your bill to {to})")


def reconciled_ledger(path: Path) -> str:
    """A ledger whose bill of the g5.xlarge was reconciled (billed 0.72 × list)."""
    url = ledger_with_sessions(path)
    folder = path / "bill"
    write_csv(folder / "aws.csv", bill_rows(EC2_G5))
    assert main([str(folder), "--ledger", url]) == 0
    return url


class TestALaterSessionAtTheBilledRate:
    """A server started after the bill was reconciled prices its g5.xlarge at 0.72 × list."""

    use_billed_rate = True

    @pytest.fixture
    def standin(self) -> Iterator[StandIn_]:
        identity = {
            **Cloud().aws_identity,
            "instanceId": "i-0fffffffffffffff1",  # another machine of the same type
            "instanceType": "g5.xlarge",
        }
        yield from serve(Cloud(aws_identity=identity))

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, standin: StandIn_, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", standin.url)
        url = reconciled_ledger(tmp_path)
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "dmi_path": write_dmi(tmp_path / "dmi", "aws"),
            "ledger_url": url,
            "use_billed_rate": self.use_billed_rate,
        }

    async def test_the_price_is_the_billed_rate_and_says_so(self, jp_fetch: Any) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        machine = status["machine"]
        assert machine["instance_type"] == "g5.xlarge"
        assert machine["priced"] == "instance"
        assert machine["instance_price_usd_per_hour"] == 0.72432  # 0.72 × 1.006
        # the bill's newest charge ends 2026-11-27T00:00Z: the bill of 2026-11-26
        assert machine["instance_price_source"].endswith(
            "; source: your billed rate (0.72 × list, from your bill of 2026-11-26)"
        )
        assert machine["instance_price_as_of"] == "2026-11-26"
        assert machine["instance_price_basis"] == "reconciled"
        # this machine has no bill of its own yet (the bill is read off the loop: twice)
        assert status["bill"] is None
        await asyncio.sleep(1)
        again = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert again["bill"] is None


class TestTheBilledRateTurnedOff(TestALaterSessionAtTheBilledRate):
    use_billed_rate = False

    async def test_the_price_is_the_billed_rate_and_says_so(self, jp_fetch: Any) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["instance_price_usd_per_hour"] == 1.006
        assert "billed rate" not in status["machine"]["instance_price_source"]


def test_a_damaged_parquet_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = write_parquet(tmp_path / "w" / "bill.parquet", bill_rows(EC2_G5)).read_bytes()
    bad = tmp_path / "bad" / "bill.parquet"
    bad.parent.mkdir()
    bad.write_bytes(whole[: len(whole) // 2])  # cut: no footer
    refused(capsys, tmp_path, bad, "bill.parquet", "cannot be read to its end")
