"""The journal: what a server could not write to a remote ledger, kept in a small local
file beside the data dir so that a crash during an outage loses at most one flush.

One JSON file per session (``<data dir>/gpucost/journal/<session id>.json``), replaced
whole (written beside, then renamed) after every flush that could not reach the ledger,
and removed once the ledger has it. A server that starts reads every journal left there
and writes it to the ledger when it can; :meth:`~.Ledger.write` drops a part the ledger
already has, so a journal read twice counts nothing twice.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .writes import GpuMinuteSums, Pending

VERSION = 1
#: a journal bigger than this is not read (it is not one we wrote)
MAX_BYTES = 64 * 2**20
#: the most any figure of a journal may be (micro-dollars, bytes, seconds)
MAX_FIGURE = 10**15


@dataclass
class JournalEntry:
    """A session's start and the parts of it the ledger does not have yet."""

    session_id: str
    started: datetime
    user: str | None
    parts: list[Pending] = field(default_factory=list)
    ended: datetime | None = None


def _pending_json(p: Pending) -> dict[str, object]:
    return {
        "spend": [[m, *row] for m, row in sorted(p.spend.items())],
        "gpus": [
            [g, m, s.utilization_pct_sum, s.power_w_sum, s.samples, s.memory_used_bytes_max]
            for (g, m), s in sorted(p.gpus.items())
        ],
        "cost_micro_usd": p.cost_micro,
        "idle_micro_usd": p.idle_micro,
        "energy_j": p.energy_j,
        "peak_memory_bytes": p.peak_memory_bytes,
        "last_unix_s": p.last_unix_s,
    }


def _whole(value: object) -> int:
    """A whole number from 0 to :data:`MAX_FIGURE` (a journal is read, not trusted)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_FIGURE:
        raise ValueError(f"not a figure: {value!r}")
    return value


def _real(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_FIGURE:
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _pending(doc: dict[str, Any]) -> Pending:
    p = Pending(
        cost_micro=_whole(doc["cost_micro_usd"]),
        idle_micro=_whole(doc["idle_micro_usd"]),
        energy_j=None if doc["energy_j"] is None else _real(doc["energy_j"]),
        peak_memory_bytes=None
        if doc["peak_memory_bytes"] is None
        else _whole(doc["peak_memory_bytes"]),
        last_unix_s=_real(doc["last_unix_s"]),
    )
    for m, cost, idle, rate in doc["spend"]:
        p.spend[_whole(m)] = [_whole(cost), _whole(idle), _whole(rate)]
    for g, m, util, power, samples, memory in doc["gpus"]:
        p.gpus[(_whole(g), _whole(m))] = GpuMinuteSums(
            _real(util), _real(power), _whole(samples), None if memory is None else _whole(memory)
        )
    return p


class Journal:
    """The journal folder of one data dir."""

    def __init__(self, folder: Path, log: logging.Logger) -> None:
        self.folder = folder
        self.log = log

    def _file(self, session_id: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_:" else "_" for ch in session_id)
        return self.folder / f"{safe.replace(':', '')}.json"

    def save(self, entry: JournalEntry) -> bool:
        """Replace the session's journal with ``entry``; False (logged) when it cannot be
        written (what it holds stays in memory)."""
        doc = {
            "version": VERSION,
            "session_id": entry.session_id,
            "started": entry.started.isoformat(),
            "user": entry.user,
            "ended": None if entry.ended is None else entry.ended.isoformat(),
            "parts": [_pending_json(p) for p in entry.parts],
        }
        path = self._file(entry.session_id)
        beside = path.with_name(path.name + ".new")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(beside, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(beside, path)
        except OSError as e:
            self.log.warning("jupyter-gpucost: cannot write the ledger's journal %s: %s", path, e)
            return False
        return True

    def remove(self, session_id: str) -> None:
        try:
            self._file(session_id).unlink(missing_ok=True)
        except OSError as e:
            self.log.warning("jupyter-gpucost: cannot remove the ledger's journal: %s", e)

    def load_all(self) -> list[JournalEntry]:
        """Every journal left in the folder, oldest session first; one that cannot be read
        is logged and left where it is."""
        entries = []
        try:
            files = sorted(self.folder.glob("*.json"))
        except OSError:
            return []
        for path in files:
            try:
                if path.stat().st_size > MAX_BYTES:
                    raise ValueError("too big")
                doc = json.loads(path.read_text(encoding="utf-8"))
                if doc.get("version") != VERSION:
                    raise ValueError(f"version {doc.get('version')!r}")
                if not isinstance(doc["session_id"], str) or not 0 < len(doc["session_id"]) <= 64:
                    raise ValueError("not a session id")
                if doc["user"] is not None and len(str(doc["user"])) > 256:
                    raise ValueError("not a user name")
                entries.append(
                    JournalEntry(
                        session_id=doc["session_id"],
                        started=datetime.fromisoformat(doc["started"]).astimezone(UTC),
                        user=None if doc["user"] is None else str(doc["user"]),
                        parts=[_pending(p) for p in doc["parts"]],
                        ended=None
                        if doc["ended"] is None
                        else datetime.fromisoformat(doc["ended"]).astimezone(UTC),
                    )
                )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                self.log.warning(
                    "jupyter-gpucost: the ledger's journal %s cannot be read (%s); it is left "
                    "there",
                    path,
                    e,
                )
        return sorted(entries, key=lambda e: e.started)
