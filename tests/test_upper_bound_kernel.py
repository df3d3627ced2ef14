"""The kernel labels an upper-bound price wherever it shows a rate: ``%gpucost`` (the
prices), a ``%%gpucost`` report and auto mode, with prices handed down by a real server
on a spot market that has no spot row, in English and in Chinese."""

from __future__ import annotations

import os
from typing import Any

import pytest
from kernel_notebook import run_notebook, text

from jupyter_gpucost.core.protocol import ENV_LANGUAGE, ENV_PRICES

SPOT = "spot: priced at on-demand, the most it can cost"


@pytest.fixture
def gpucost_config() -> dict[str, object]:
    # the demo trace's two A100-80GB, at the admin's aws spot prices (the catalog has none)
    return {
        "telemetry": "simulated",
        "price_market": "spot",
        "price_region": "us-east-1",
        "ledger_url": "none",
    }


@pytest.mark.usefixtures("jp_serverapp")
def test_magics_and_auto_mode_show_the_upper_bound_label() -> None:
    published = os.environ[ENV_PRICES]
    cells = [
        "%load_ext jupyter_gpucost",
        "%gpucost",
        "%%gpucost -o r\nx = 1",
        "print(r.notes)",
        "%gpucost auto on",
        "y = 2",
        "%gpucost auto off",
    ]
    nb = run_notebook(cells, env={ENV_PRICES: published})
    prices = text(nb.cells[1])
    assert f"$3.431/h (upper bound: {SPOT})" in prices
    assert f"NVIDIA A100-SXM4-80GB is priced at an upper bound: {SPOT}" in text(nb.cells[3])
    # auto mode adds nothing under a cell (its record travels in the reply's metadata):
    # the label is where the prices are shown, above
    assert nb.cells[5].outputs == []
    chinese = run_notebook(cells[:2], env={ENV_PRICES: published, ENV_LANGUAGE: "zh_CN"})
    assert "上限" in text(chinese.cells[1])
    assert SPOT not in text(chinese.cells[1])


def test_the_server_names_the_bound_in_what_it_hands_down(jp_serverapp: Any) -> None:
    assert '"upper_bound": {"msgid": "spot: priced at on-demand' in os.environ[ENV_PRICES]
