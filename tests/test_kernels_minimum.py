"""The kernels' table names the billing rule's minimum charge apart from GPU use by no kernel."""

from __future__ import annotations

import asyncio
import json
from typing import Any


async def test_with_no_kernel_the_unattributed_cost_is_the_minimum_charge(jp_fetch: Any) -> None:
    # simulated GPUs, the default 60 s minimum charge, a few seconds in, no kernel
    await asyncio.sleep(1.5)
    body = json.loads((await jp_fetch("gpucost", "api", "kernels")).body)
    assert body["kernels"] == []
    micro = body["micro_usd"]
    assert micro["minimum_charge"] > 0
    # nothing runs: all that no kernel accounts for is the minimum charge, or a sample's
    # unobserved start; never more than the unattributed part
    assert 0 < micro["minimum_charge"] <= micro["unattributed"]
    assert body["minimum_charge_usd"] == micro["minimum_charge"] / 1_000_000
    # the table still adds up
    assert micro["idle"] + micro["unattributed"] == micro["total"]
