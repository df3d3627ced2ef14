"""Bounded waits for the tests: a predicate is asked until it holds or time runs out.

An exception inside the predicate counts as "not yet" (a slow answer on a busy machine, a
server still starting) and is shown in the failure if time runs out, so a wait never fails
early on something that would have settled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def _failure(what: str, timeout_s: float, last: str) -> AssertionError:
    return AssertionError(f"timed out after {timeout_s} s: {what} (last error: {last})")


async def wait_for(what: Callable[[], Awaitable[object]], timeout_s: float, message: str) -> None:
    """Await ``what()`` every 0.2 s until it is true, or fail saying ``message``."""
    deadline = time.monotonic() + timeout_s
    last = "none"
    while time.monotonic() < deadline:
        try:
            if await what():
                return
        except Exception as e:
            last = f"{type(e).__name__}: {e}"
        await asyncio.sleep(0.2)
    raise _failure(message, timeout_s, last)


def wait_until(what: str, predicate: Callable[[], object], timeout_s: float) -> None:
    """Ask ``predicate()`` every half second until it is true, or fail saying ``what``."""
    deadline = time.monotonic() + timeout_s
    last = "none"
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    raise _failure(what, timeout_s, last)
