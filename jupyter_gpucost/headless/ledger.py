"""A headless run in the ledger: the panel's today, month, history and recent cells count it.

``jupyter gpucost run`` appends the run to the ledger a Jupyter server on this machine keeps
(``<Jupyter data dir>/gpucost/ledger.sqlite``, when it exists) or to the one named with
``--ledger URL`` (``c.GpuCost.ledger_url``'s form): one session for the run, its cost by the
minute each cell ended in (what no cell's record holds, in the minute the run ended: the
run's metered cost is never lowered by its records), and each cell's record as the server
keeps the cells it is sent; all in one transaction.

A write that fails keeps the run in ``<Jupyter data dir>/gpucost/pending-runs/`` (the
ledger's URL without its password, the run's entry) and the next ``jupyter gpucost run``
to that ledger writes it first: a run's cost is never silently dropped.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..core.saved_cost import SavedCell, parse_cell

PENDING_FOLDER = "pending-runs"


@dataclass(frozen=True)
class RunEntry:
    """What one run adds to a ledger."""

    session_id: str
    notebook_path: str
    started: datetime
    ended: datetime
    #: the run's cost as the runner metered it (at least the sum of its cells)
    cost_micro_usd: int
    rate_usd_per_hour: Decimal
    cells: tuple[tuple[str, SavedCell], ...]
    user: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "notebook_path": self.notebook_path,
            "started": self.started.isoformat(),
            "ended": self.ended.isoformat(),
            "cost_micro_usd": self.cost_micro_usd,
            "rate_usd_per_hour": str(self.rate_usd_per_hour),
            "cells": [[cell_id, cell.to_json()] for cell_id, cell in self.cells],
            "user": self.user,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RunEntry:
        return cls(
            session_id=str(value["session_id"]),
            notebook_path=str(value["notebook_path"]),
            started=datetime.fromisoformat(str(value["started"])),
            ended=datetime.fromisoformat(str(value["ended"])),
            cost_micro_usd=int(value["cost_micro_usd"]),
            rate_usd_per_hour=Decimal(str(value["rate_usd_per_hour"])),
            cells=tuple((str(i), parse_cell(c)) for i, c in value["cells"]),
            user=value.get("user") or None,
        )


def data_folder() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "gpucost"


def default_ledger_url() -> str | None:
    """The server's default ledger on this machine, if a server has made it."""
    path = data_folder() / "ledger.sqlite"
    return f"sqlite:///{path}" if path.exists() else None


def shown_url(url: str) -> str:
    """The ledger's URL without its password (what is printed and kept in a pending file)."""
    import sqlalchemy as sa

    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: the write says why
        return url.split("://", 1)[0] + "://…" if "@" in url else url


def server_record(cell: SavedCell, cell_id: str, notebook_path: str) -> dict[str, object]:
    """A saved cell as the server's cells route keeps it (``GET /gpucost/api/cells``)."""
    return {
        "cell_id": cell_id,
        "notebook_path": notebook_path,
        "kernel_id": None,
        "started": cell.started,
        "ended": cell.at,
        "wall_s": cell.wall_s,
        "cost_usd": cell.cost_micro_usd / 1_000_000,
        "rate_usd_per_hour": float(cell.rate_usd_per_hour),
        "gpu_busy_s": cell.gpu_busy_s,
        "peak_memory_bytes": None,
        "energy_j": None,
        "status": cell.status,
        "mode": cell.mode,
    }


def spend_rows(entry: RunEntry) -> list[tuple[int, int, int, int]]:
    """(minute, cost, idle, rate) rows: each cell in the minute it ended, the rest of the
    metered cost in the minute the run ended; they add up to the run's cost."""
    minutes: dict[int, int] = defaultdict(int)
    for _, cell in entry.cells:
        minutes[int(datetime.fromisoformat(cell.at).timestamp()) // 60 * 60] += cell.cost_micro_usd
    rest = entry.cost_micro_usd - sum(minutes.values())
    if rest > 0:
        minutes[int(entry.ended.timestamp()) // 60 * 60] += rest
    rate = int(entry.rate_usd_per_hour * 1_000_000)
    return [(m, c, 0, rate) for m, c in sorted(minutes.items()) if c > 0]


def append_run(url: str, entry: RunEntry) -> None:
    """Add the run to the ledger at ``url`` (one transaction); raises when it cannot."""
    from ..server.ledger import Ledger

    ledger = Ledger(url)
    try:
        records = [server_record(c, i, entry.notebook_path) for i, c in entry.cells]
        ledger.add_run(
            entry.session_id, entry.started, entry.ended, entry.user, spend_rows(entry), records
        )
    finally:
        ledger.close()


def keep_pending(url: str, entry: RunEntry) -> Path:
    """Keep a run whose write failed, for the next start (the user's own folder, 0600)."""
    folder = data_folder() / PENDING_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry.session_id.replace(':', '')}.json"
    body = json.dumps({"ledger": shown_url(url), "entry": entry.to_json()})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)
    return path


def write_pending(url: str) -> tuple[int, list[str]]:
    """Write the runs kept for this ledger; (how many were written, why others were not)."""
    folder = data_folder() / PENDING_FOLDER
    if not folder.is_dir():
        return 0, []
    written, errors = 0, []
    for path in sorted(folder.glob("*.json")):
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            if kept.get("ledger") != shown_url(url):
                continue
            append_run(url, RunEntry.from_json(kept["entry"]))
        except Exception as e:  # kept for the next start; the caller says why
            errors.append(f"{path.name}: {type(e).__name__}: {e}")
            continue
        path.unlink()
        written += 1
    return written, errors
