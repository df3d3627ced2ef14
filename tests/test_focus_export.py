"""``jupyter gpucost export-focus``: the ledger as a FOCUS 1.2 dataset, checked against the
specification's mandatory columns, types and values (the FinOps Foundation's validator
needs Python 3.12 or later: ``focus-validator`` 2.x is not installable here), and read back
by the reconcile reader."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from focus_schema import read_focus
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.reconcile.export import main, split
from jupyter_gpucost.reconcile.focus_writer import Charge, write_focus
from jupyter_gpucost.reconcile.read import read_bill
from jupyter_gpucost.server.ledger import Ledger


def ledger(url: str) -> tuple[str, int]:
    """Two sessions of two users on a detected g5.xlarge and on no known machine."""
    book = Ledger(url)
    start = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
    total = 0
    for n, user in enumerate(("alice", "bob")):
        spend = [(int(start.timestamp()) + 60 * m, 16_766 + n, 0, 0) for m in range(90)]
        total += sum(r[1] for r in spend)
        book.add_run(f"s{n}", start, start + timedelta(minutes=90), user, spend, [])
    book.record_machine(
        "s0",
        Machine(
            "aws", instance_type="g5.xlarge", region="us-east-1", instance_id="i-0a5b7c9d1e3f50000"
        ),
        "USD",
    )
    book.close()
    return url, total


@pytest.mark.parametrize("name", ["focus.csv", "focus.parquet"])
def test_the_export_is_focus_1_2_and_adds_up_to_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, ledger_url: str
) -> None:
    # from a SQLite file and from a real PostgreSQL database
    url, total = ledger(ledger_url)
    out = tmp_path / "out" / name
    assert main([str(out), "--ledger", url]) == 0
    assert "4 FOCUS rows written" in capsys.readouterr().out  # 2 sessions × 2 hours
    rows = read_focus(out)
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(out)
        assert str(table.schema.field("BilledCost").type).startswith("decimal128")
        # Parquet keeps times in milliseconds at the least
        assert str(table.schema.field("ChargePeriodStart").type) == "timestamp[ms, tz=UTC]"
    for row in rows:
        assert row["BillingCurrency"] == "USD"  # what the ledger recorded
        assert json.loads(str(row["Tags"]))["x_User"] == row["x_User"]
        # the single server knows no group or profile; no cells here: no notebook either
        for name in ("x_Group", "x_Profile", "x_Notebook", "x_Kernel"):
            assert row[name] in (None, ""), name
        assert str(row["x_PriceBasis"]).startswith("estimate")
    by_user = {r["x_User"] for r in rows}
    assert by_user == {"alice", "bob"}
    machine_rows = [r for r in rows if r["ResourceId"] == "i-0a5b7c9d1e3f50000"]
    assert {r["x_InstanceType"] for r in machine_rows} == {"g5.xlarge"}
    assert {r["ProviderName"] for r in machine_rows} == {"AWS"}

    # read back by the reconcile reader: the same money, to the micro-unit
    bill = read_bill(str(out), {"i-0a5b7c9d1e3f50000", "s1"})
    assert bill.rows_read == 4
    assert sum(r.billed for r in bill.rows) * 1_000_000 == total


def test_since_keeps_the_later_hours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    out = tmp_path / "focus.csv"
    assert main([str(out), "--ledger", url, "--since", "2026-11-25"]) == 0
    assert "0 FOCUS rows written" in capsys.readouterr().out


def cell(notebook: str, kernel: str, ended: datetime, cost_micro: int) -> dict[str, object]:
    """A cell record as the kernel extension sends it (``kernel/auto.py``)."""
    return {
        "cell_id": f"{notebook}-{ended:%H%M}",
        "notebook_path": notebook,
        "kernel_id": kernel,
        "started": (ended - timedelta(minutes=1)).isoformat(),
        "ended": ended.isoformat(),
        "cost_usd": cost_micro / 1_000_000,
    }


def test_each_notebook_and_kernel_gets_what_its_cells_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # one session in EUR, two notebooks on two kernels in its first hour
    book = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    start = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    spend = [(int(start.timestamp()) + 60 * m, 10_000, 0, 0) for m in range(120)]
    cells = [
        cell("train.ipynb", "k-1", start + timedelta(minutes=10), 100_000),
        cell("train.ipynb", "k-1", start + timedelta(minutes=20), 50_000),
        cell("eval.ipynb", "k-2", start + timedelta(minutes=30), 30_000),
        # a cell costing more than the rest of its hour takes only what is left
        cell("eval.ipynb", "k-2", start + timedelta(minutes=100), 5_000_000),
    ]
    book.add_run("s0", start, start + timedelta(hours=2), "carol", spend, cells)
    book.record_machine("s0", Machine("azure", instance_type="NC24ads_A100_v4"), "EUR")
    book.close()
    out = tmp_path / "focus.parquet"
    assert main([str(out), "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}"]) == 0
    rows = read_focus(out)
    got = {
        (r["ChargePeriodStart"].hour, r["x_Notebook"], r["x_Kernel"]): r["BilledCost"]  # type: ignore[union-attr]
        for r in rows
    }
    assert got == {
        (10, "train.ipynb", "k-1"): Decimal("0.15"),
        (10, "eval.ipynb", "k-2"): Decimal("0.03"),
        (10, None, None): Decimal("0.42"),  # between cells
        (11, "eval.ipynb", "k-2"): Decimal("0.6"),
    }
    assert {r["BillingCurrency"] for r in rows} == {"EUR"}
    # the hours follow the money: 60 minutes of the first hour split by cost
    assert sum(Decimal(str(r["ConsumedQuantity"])) for r in rows) == Decimal(2)
    assert {json.loads(str(r["Tags"])).get("x_Notebook") for r in rows} == {
        "train.ipynb",
        "eval.ipynb",
        None,
    }


@given(
    cost=st.integers(0, 10**12),
    cells=st.lists(st.integers(0, 10**12), max_size=6),
)
def test_an_hour_split_by_its_cells_adds_up_exactly(cost: int, cells: list[int]) -> None:
    parts = split(cost, tuple((f"n{i}", "", c) for i, c in enumerate(cells)))
    assert sum(p[2] for p in parts) == cost
    assert all(p[2] >= 0 for p in parts)
    assert len({(p[0], p[1]) for p in parts}) == len(parts)


def test_the_currency_is_the_ledgers_never_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    book = Ledger(url)
    start = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    for n in range(2):
        book.add_run(f"s{n}", start, start, "dan", [(int(start.timestamp()), 5, 0, 0)], [])
    book.close()
    out = tmp_path / "focus.csv"
    # no session says its currency: refused, not written as USD
    assert main([str(out), "--ledger", url]) == 6
    assert "--currency" in capsys.readouterr().err
    assert not out.exists()
    assert main([str(out), "--ledger", url, "--currency", "JPY"]) == 0
    assert {r["BillingCurrency"] for r in read_focus(out)} == {"JPY"}
    with pytest.raises(SystemExit) as wrong:
        main([str(out), "--ledger", url, "--currency", "yen"])
    assert wrong.value.code == 2


def left_behind(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("ledger.sqlite"))


def test_an_empty_ledger_is_said_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    Ledger(url).close()
    assert main([str(tmp_path / "focus.csv"), "--ledger", url]) == 5
    assert "no sessions yet" in capsys.readouterr().err
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("focus.xlsx", "name the file .csv or .parquet"),
        ("folder.csv", "is a folder"),
        ("ledger.sqlite", "name the file .csv or .parquet"),
    ],
)
def test_a_wrong_out_is_refused_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    url, _ = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "folder.csv").mkdir()
    before = (tmp_path / "ledger.sqlite").read_bytes()
    assert main([str(tmp_path / name), "--ledger", url]) == 4
    assert said in capsys.readouterr().err
    assert left_behind(tmp_path) == ["folder.csv"]
    assert (tmp_path / "ledger.sqlite").read_bytes() == before


def test_the_ledger_itself_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.csv"  # a ledger whose name an export could take
    url, _ = ledger(f"sqlite:///{path}")
    before = path.read_bytes()
    assert main([str(path), "--ledger", url]) == 4
    assert "is the ledger itself" in capsys.readouterr().err
    assert path.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_an_unwritable_out_is_said_and_an_old_export_stays_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    shut = tmp_path / "shut"
    shut.mkdir()
    old = shut / "focus.csv"
    old.write_text("the export of last month\n")
    shut.chmod(0o500)
    try:
        assert main([str(old), "--ledger", url]) == 4
        assert f"cannot write {old}" in capsys.readouterr().err
        assert sorted(p.name for p in shut.iterdir()) == ["focus.csv"]
        assert old.read_text() == "the export of last month\n"
    finally:
        shut.chmod(0o700)


def test_out_under_a_file_is_said_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a folder that cannot be made (a file stands in the way): unwritable, even for root
    url, _ = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "notes").write_text("not a folder\n")
    out = tmp_path / "notes" / "focus.parquet"
    assert main([str(out), "--ledger", url]) == 4
    assert f"cannot write {out}: {tmp_path / 'notes'} is a file" in capsys.readouterr().err
    assert left_behind(tmp_path) == ["notes"]
    assert (tmp_path / "notes").read_text() == "not a folder\n"


#: what a user may name a notebook or be called: quotes, commas, newlines, any script
NAMES = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user=NAMES, notebook=NAMES, kernel=NAMES, cost=st.integers(0, 10**15))
@example(user="NA", notebook="null", kernel='a,"b"\nc', cost=1)
def test_any_names_and_amounts_come_back_as_written(
    tmp_path: Path, user: str, notebook: str, kernel: str, cost: int
) -> None:
    start = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    charge = Charge(
        start=start,
        end=start + timedelta(hours=1),
        cost=cost,
        list_cost=cost,
        currency="EUR",
        price_basis="estimate",
        hours=Decimal(1),
        session="s0",
        resource_id="s0",
        resource_type="Jupyter server session",
        user=user,
        notebook=notebook,
        kernel=kernel,
    )
    for name in ("focus.csv", "focus.parquet"):
        out = tmp_path / name
        write_focus(out, [charge])
        (row,) = read_focus(out)
        assert Decimal(str(row["BilledCost"])) * 1_000_000 == cost
        tags = json.loads(str(row["Tags"]))
        for column, value in (("x_User", user), ("x_Notebook", notebook), ("x_Kernel", kernel)):
            assert (row[column] or "") == value
            assert tags.get(column, "") == value


def test_jupyter_gpucost_export_focus_runs_as_installed(tmp_path: Path) -> None:
    # the command a user types (jupyter gpucost → the jupyter-gpucost script)
    import shutil
    import subprocess
    import sys

    url, total = ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    script = shutil.which("jupyter-gpucost", path=str(Path(sys.executable).parent))
    assert script is not None
    out = tmp_path / "focus.csv"
    done = subprocess.run(
        [script, "export-focus", str(out), "--ledger", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = read_focus(out)
    assert sum(Decimal(str(r["BilledCost"])) for r in rows) * 1_000_000 == total
