"""What was sent: each alert's event key, remembered until the end of its period.

An alert's key is its event (:attr:`.model.Alert.key`: the kind, the user, the budget and
its period or the stop's id, the threshold), never its wording. A key is remembered until
its time (:data:`.model.REMEMBER` after it was sent: longer than its period), however many other
alerts go out meanwhile: there is no count past which the oldest is forgotten. Expired
keys are pruned when the memory is written.

Where the keys are kept: a ledger's table (:mod:`jupyter_gpucost.core.sent_keys`: the
hub's, and a single server's when it has a ledger), or :class:`FileKeys` (a JSON file in
the server's data directory, without a ledger), both behind :class:`SentKeys`. Their
writes run on the dispatcher's worker threads, never the caller's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

#: how long a key of a file written before keys had an end is kept from its reading
LEGACY_KEEP = timedelta(days=35)


class SentKeys(Protocol):
    """Where the keys sent are kept across restarts."""

    def load(self, now: datetime) -> dict[str, datetime]:
        """Every key still remembered at ``now``, and until when."""
        ...

    def keep(self, keys: Mapping[str, datetime], now: datetime) -> None:
        """Remember ``keys`` (each until its time; a later time replaces an earlier one),
        and forget those expired by ``now``."""
        ...


class FileKeys:
    """The keys in a JSON file (``{"sent": {key: until}}``), rewritten whole."""

    def __init__(self, path: Path, log: logging.Logger | None = None) -> None:
        self.path = path
        self.log = log or logging.getLogger("jupyter_gpucost")

    def _read(self, now: datetime) -> dict[str, datetime]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.log.warning("jupyter-gpucost: the alerts' state file could not be read")
            return {}
        sent = data.get("sent") if isinstance(data, dict) else None
        if isinstance(sent, list):
            # written by an older version: keys without an end
            return {k: now + LEGACY_KEEP for k in sent if isinstance(k, str)}
        if not isinstance(sent, dict):
            return {}
        found = {}
        for key, until in sent.items():
            try:
                when = datetime.fromisoformat(until) if isinstance(until, str) else None
            except ValueError:
                when = None
            if when is not None and when.tzinfo is not None and when > now:
                found[str(key)] = when
        return found

    def load(self, now: datetime) -> dict[str, datetime]:
        return self._read(now)

    def keep(self, keys: Mapping[str, datetime], now: datetime) -> None:
        kept = self._read(now)
        for key, until in keys.items():
            if until > now and until > kept.get(key, until - timedelta(seconds=1)):
                kept[key] = until
        doc = {"sent": {k: v.astimezone(UTC).isoformat() for k, v in kept.items()}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(doc), encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError:
            self.log.warning("jupyter-gpucost: the alerts' state file could not be written")
