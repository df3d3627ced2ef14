"""A blocking call waited for a bounded time: the one way the machine's start-up asks a
slow outside party (its metadata service, a price API, a cloud's price feed) without
letting it hold the server's start.

The call runs in a worker thread of its own; past the limit it is left to finish on its
own (its own requests are bounded too) and the caller goes on without its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def bounded(call: Callable[[], T], limit_s: float, name: str) -> T:
    """``call()`` in a worker thread named ``name``, waited for ``limit_s`` at most
    (:class:`concurrent.futures.TimeoutError` past it; its own exceptions raised as
    they are)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    try:
        return pool.submit(call).result(limit_s)
    finally:
        pool.shutdown(wait=False)
