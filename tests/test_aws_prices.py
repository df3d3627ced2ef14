"""scripts/aws_prices.py against a loopback stand-in of AWS's Price List Bulk API.

The stand-in serves the recorded files of ``tests/data/aws_price_list`` (see its README) at
the paths AWS serves them, ``/offers/v1.0/aws/AmazonEC2/current/region_index.json`` and
each region's ``currentVersionUrl``; the script's output is the rows the shipped catalog
has for those sizes and regions.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import threading
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.core.instance_prices import load_instance_rows

ROOT = Path(__file__).resolve().parents[1]
RECORDED = Path(__file__).parent / "data" / "aws_price_list"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("aws_prices", ROOT / "scripts" / "aws_prices.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


AWS = _script()


class _Files(SimpleHTTPRequestHandler):
    """The recorded files; ``current/region_index.json`` is the index, as AWS serves it."""

    asked: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def translate_path(self, path: str) -> str:
        type(self).asked.append(path)
        if path == "/offers/v1.0/aws/AmazonEC2/current/region_index.json":
            return str(RECORDED / "region_index.json")
        return super().translate_path(path)


@pytest.fixture
def price_list() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []
    handler = type("Handler", (_Files,), {"asked": asked})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(RECORDED)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = AWS.main(list(argv))
    out = capsys.readouterr()
    assert isinstance(code, int)
    return code, tomllib.loads(out.out) if code == 0 else {"err": out.err}


def test_the_script_s_rows_are_the_shipped_rows(
    price_list: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, asked = price_list
    code, found = _run(capsys, "--base", base)
    assert code == 0
    # every region of the index, each file read once
    assert sorted(asked) == sorted(
        [
            "/offers/v1.0/aws/AmazonEC2/current/region_index.json",
            *(
                f"/offers/v1.0/aws/AmazonEC2/20261101000000/{r}/index.json"
                for r in ("ap-northeast-1", "eu-west-1", "us-east-1")
            ),
        ]
    )
    instances = found["instance"]
    # the Linux, shared, no-software, used-capacity product only; nothing else
    assert {(r["instance"], r["region"]) for r in instances} == {
        (i, r)
        for i in ("g4dn.xlarge", "g5.xlarge")
        for r in ("us-east-1", "eu-west-1", "ap-northeast-1")
    }
    shipped = {(r.instance, r.region, r.market): r for r in load_instance_rows()}
    for row in instances:
        ours = shipped[(row["instance"], row["region"], "on-demand")]
        assert (row["provider"], row["market"]) == ("aws", "on-demand")
        assert (row["gpu_model"], row["gpus"]) == (ours.gpu_model, ours.gpus)
        assert Decimal(row["usd_per_hour"]) == ours.per_hour, row
        assert (row["confidence"], row["as_of"]) == ("listed", "2026-08-26")
        assert row["source"].startswith(f"AWS Price List Bulk API, {base}/offers/v1.0/aws/")
    per_gpu = {(r.instance, r.region): r for r in load_catalog().rows if r.provider == "aws"}
    prices = found["price"]
    assert len(prices) == 6
    for row in prices:
        ours_gpu = per_gpu[(row["instance"], row["region"])]
        assert row["model"] == ours_gpu.model
        assert Decimal(row["usd_per_gpu_hour"]) == ours_gpu.per_gpu_hour, row


def test_one_region_and_an_unknown_one(
    price_list: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = price_list
    code, found = _run(capsys, "--base", base, "--region", "eu-west-1")
    assert code == 0
    assert {r["region"] for r in found["instance"]} == {"eu-west-1"}
    code, found = _run(capsys, "--base", base, "--region", "mars-north-1")
    assert code == 2
    assert "the price list has no region mars-north-1" in found["err"]


def test_the_file_is_read_in_pieces_and_terms_before_products_are_refused() -> None:
    text = (RECORDED / "offers/v1.0/aws/AmazonEC2/20261101000000/eu-west-1/index.json").read_bytes()

    class Trickle(io.BytesIO):
        """A stream that gives a few bytes at a time, as a slow socket does."""

        def read(self, size: int | None = -1) -> bytes:
            return super().read(7)

    offer = AWS.read_offer(
        Trickle(text), region="eu-west-1", url="x", instances=frozenset({"g5.xlarge"})
    )
    assert offer.usd_per_hour == {"g5.xlarge": Decimal("1.123")}
    assert offer.published == "2026-08-26T00:00:00Z"
    swapped = b'{"publicationDate": "x", "terms": {"OnDemand": {}}, "products": {}}'
    with pytest.raises(AWS.FeedError, match="the terms come before the products"):
        AWS.read_offer(io.BytesIO(swapped), region="r", url="u", instances=frozenset())
