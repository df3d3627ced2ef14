"""The kernel's side of the execute reply: a record goes with the reply to the request whose
cell made it, never with another request's, and what waits for a reply that never comes is
bounded. ipykernel's own ``finish_metadata`` keeps doing what it did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jupyter_gpucost.kernel.cell.saved import MAX_PENDING, REPLY_KEY, install


class Kernel:
    """ipykernel's parts the wrapper uses: the running request, ``finish_metadata``."""

    def __init__(self) -> None:
        self.parent: dict[str, Any] = {}

    def get_parent(self, channel: str = "shell") -> Mapping[str, Any]:
        return self.parent

    def finish_metadata(
        self, parent: Mapping[str, Any], metadata: dict[str, Any], reply: Mapping[str, Any]
    ) -> dict[str, Any]:
        metadata["status"] = reply["status"]
        return metadata


class Shell:
    def __init__(self) -> None:
        self.kernel = Kernel()


def request(msg_id: str) -> dict[str, Any]:
    return {"header": {"msg_id": msg_id, "msg_type": "execute_request"}}


def test_a_record_goes_with_its_own_request_reply() -> None:
    shell = Shell()
    records = install(shell)
    assert records is not None
    assert install(shell) is records  # wrapped once, however often the extension loads
    kernel = shell.kernel
    kernel.parent = request("a")
    records.put({"cost_micro_usd": 1})
    # another request's reply (a silent one the page sent meanwhile) carries nothing
    other = kernel.finish_metadata(request("b"), {"started": "t"}, {"status": "ok"})
    assert other == {"started": "t", "status": "ok"}
    mine = kernel.finish_metadata(request("a"), {"started": "t"}, {"status": "error"})
    assert mine == {"started": "t", "status": "error", REPLY_KEY: {"cost_micro_usd": 1}}
    # sent once
    again = kernel.finish_metadata(request("a"), {}, {"status": "ok"})
    assert REPLY_KEY not in again


def test_the_last_record_of_a_request_is_sent_and_the_waiting_ones_are_bounded() -> None:
    shell = Shell()
    records = install(shell)
    assert records is not None
    kernel = shell.kernel
    kernel.parent = request("a")
    records.put({"n": 1})
    records.put({"n": 2})  # a nested run_cell, then the cell itself: the cell's
    for i in range(3 * MAX_PENDING):  # requests whose replies never came
        kernel.parent = request(f"lost-{i}")
        records.put({"n": i})
    assert len(records.pending) == MAX_PENDING
    kernel.parent = request("z")
    records.put({"n": "z"})
    assert kernel.finish_metadata(request("z"), {}, {"status": "ok"})[REPLY_KEY] == {"n": "z"}


def test_outside_a_kernel_nothing_is_installed() -> None:
    assert install(object()) is None
    assert install(None) is None
