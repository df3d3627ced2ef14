"""The targets a user adds for their own alerts from the panel, kept in a file beside the
alerts' state (mode 0600: the URLs hold secrets). The admin's (``c.GpuCost.notify``) are
never here, so the user's API can neither read nor change them."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ...alerts.targets import Target, TargetError, parse_target, parse_targets

#: the most targets a user may add
MAX_USER_TARGETS = 10
SETTING = "alert target"


class UserTargets:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._targets: tuple[Target, ...] = self._load()

    @property
    def targets(self) -> tuple[Target, ...]:
        return self._targets

    def _load(self) -> tuple[Target, ...]:
        if self.path is None or not self.path.is_file():
            return ()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            urls = data.get("targets", []) if isinstance(data, dict) else []
            return parse_targets([u for u in urls if isinstance(u, str)], SETTING)
        except (OSError, ValueError):
            return ()

    def _save(self, targets: tuple[Target, ...]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"targets": [t.url for t in targets]}, f)
        os.replace(temporary, self.path)

    def add(self, raw: object) -> Target:
        """Check and keep a URL (blocking: call from a thread); :class:`TargetError`."""
        target = parse_target(raw, SETTING)
        with self._lock:
            if target.url in {t.url for t in self._targets}:
                return target
            if len(self._targets) >= MAX_USER_TARGETS:
                raise TargetError(f"at most {MAX_USER_TARGETS} targets can be added")
            targets = (*self._targets, target)
            self._save(targets)
            self._targets = targets
        return target

    def remove(self, target_id: str) -> bool:
        with self._lock:
            kept = tuple(t for t in self._targets if t.id != target_id)
            if len(kept) == len(self._targets):
                return False
            self._save(kept)
            self._targets = kept
        return True
