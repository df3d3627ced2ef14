"""The training guard's side of a spot interruption (:mod:`...core.interruption_files`).

A guard given ``on_interrupt`` registers itself in the folder the server names
(``GPUCOST_INTERRUPTION_DIR``) while its loop runs. At each step it looks (at most every
``LOOK_EVERY_S``: one ``stat``) for the server's notice; when it is there, it calls
``on_interrupt(guard)`` (to save a checkpoint), answers with the checkpoint's path if the
callback returned one, and the guard stops the loop with :class:`MachineInterrupted`.
Outside such a server (no folder named) nothing is written and nothing is looked at.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from ...core.i18n import _
from ...core.interruption_files import ENV_NAME, NOTICE, ack_name, guard_name, read_json, write_json

#: a guard looks for the notice at most this often
LOOK_EVERY_S = 0.2

_numbers = itertools.count(1)


class MachineInterrupted(Exception):
    """Raised by ``Guard.step`` after ``on_interrupt`` ran: the cloud is taking the machine
    back (``deadline``: when, ISO-8601 UTC; ``checkpoint``: what ``on_interrupt``
    returned, as a path, if it did)."""

    def __init__(self, message: str, deadline: str, checkpoint: str | None) -> None:
        super().__init__(message)
        self.deadline = deadline
        self.checkpoint = checkpoint


class InterruptWatch:
    """One guard's registration and its look at the notice."""

    def __init__(self) -> None:
        folder = os.environ.get(ENV_NAME, "")
        self.folder = Path(folder) if folder else None
        self.name = guard_name(os.getpid(), next(_numbers))
        self._next_look = 0.0
        self.answered = False

    def register(self) -> None:
        if self.folder is None:
            return
        try:
            write_json(self.folder / self.name, {"pid": os.getpid()})
        except OSError:
            self.folder = None  # the server's folder is gone: nothing to answer

    def unregister(self) -> None:
        if self.folder is not None:
            (self.folder / self.name).unlink(missing_ok=True)

    def notice(self) -> dict[str, object] | None:
        """The server's notice, when it came (looked at every LOOK_EVERY_S at most)."""
        if self.folder is None or self.answered:
            return None
        now = time.monotonic()
        if now < self._next_look:
            return None
        self._next_look = now + LOOK_EVERY_S
        return read_json(self.folder / NOTICE)

    def answer(self, checkpoint: object, error: str | None) -> str | None:
        """Tell the server the checkpoint is written (or why not); the path it names."""
        self.answered = True
        path = None
        if isinstance(checkpoint, str | os.PathLike):
            path = os.path.abspath(os.fspath(checkpoint))
        if self.folder is not None:
            document = {
                "ok": error is None,
                "checkpoint": path,
                "error": error,
                "at": datetime.now(UTC).isoformat(),
            }
            with contextlib.suppress(OSError):
                write_json(self.folder / ack_name(self.name), document)
        return path if isinstance(path, str) else None


def interrupted_message(notice: dict[str, object], path: str | None) -> str:
    deadline = str(notice.get("deadline", ""))
    if path:
        return _(
            "The cloud is taking this machine back (at {deadline}): checkpoint saved to {path}; "
            "the loop stopped."
        ).format(deadline=deadline, path=path)
    return _(
        "The cloud is taking this machine back (at {deadline}): on_interrupt ran; the loop stopped."
    ).format(deadline=deadline)
