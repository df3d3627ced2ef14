"""A headless run in the ledger: the panel's today, month, history and recent cells count it.

``jupyter gpucost run`` appends the run to the ledger a Jupyter server on this machine keeps
(``<Jupyter data dir>/gpucost/ledger.sqlite``, when it exists) or to the one named with
``--ledger URL`` (``c.GpuCost.ledger_url``'s form): one session for the run, its cost by the
minute each cell ended in, and each cell's record as the server keeps the cells it is sent.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from ..core.saved_cost import SavedCell


def default_ledger_url() -> str | None:
    """The server's default ledger on this machine, if a server has made it."""
    from jupyter_core.paths import jupyter_data_dir

    path = Path(jupyter_data_dir()) / "gpucost" / "ledger.sqlite"
    return f"sqlite:///{path}" if path.exists() else None


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


def append_run(url: str, cells: list[tuple[str, SavedCell]], notebook_path: str) -> str | None:
    """Add the run to the ledger at ``url``; the session's id (``None``: nothing priced)."""
    if not cells:
        return None
    from ..server.ledger import Ledger, new_session_id

    started = min(datetime.fromisoformat(c.started) for _, c in cells)
    ended = max(datetime.fromisoformat(c.at) for _, c in cells)
    minutes: dict[int, int] = defaultdict(int)
    rates: dict[int, int] = {}
    for _, cell in cells:
        minute = int(datetime.fromisoformat(cell.at).timestamp()) // 60 * 60
        minutes[minute] += cell.cost_micro_usd
        rates[minute] = int(cell.rate_usd_per_hour * 1_000_000)
    ledger = Ledger(url)
    try:
        session_id = new_session_id(started)
        ledger.start_session(session_id, started, os.environ.get("JUPYTERHUB_USER") or None)
        ledger.bulk_spend(session_id, [(m, c, 0, rates[m]) for m, c in sorted(minutes.items())])
        for cell_id, cell in cells:
            ledger.add_cell(session_id, server_record(cell, cell_id, notebook_path))
        ledger.end_session(session_id, ended)
    finally:
        ledger.close()
    return session_id
