"""The kernel ↔ server contract (core.protocol) and the kernel's one client (kernel.link).

The server writes the contract, the kernel reads it; the ticker, the magics and auto mode
all reach the server through ``ServerLink``, each failure worded as before for its reader.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jupyter_gpucost.core.protocol import (
    ENV_PRICES,
    ENV_TOKEN,
    ENV_URL,
    PricedGpu,
    PublishedPrices,
    decode_prices,
    encode_prices,
)
from jupyter_gpucost.kernel.cell import prices as kernel_prices
from jupyter_gpucost.kernel.link import LinkError, ServerLink, published_prices
from jupyter_gpucost.kernel.widgets import StatusError, fetch_status

TOKEN = "kernels-token"

PUBLISHED = PublishedPrices(
    gpus=(
        PricedGpu("GPU-a", "NVIDIA H100 80GB HBM3", Decimal("6.880001")),
        PricedGpu("GPU-b", "Mystery GPU", None),
    ),
    base_per_hour=Decimal("0.5"),
    currency_symbol="€",
    source="the server's gcp spot prices",
    simulated=True,
    simulated_by="a recorded trace",
    currency="EUR",
)


def test_the_prices_payload_is_exact_json_and_reads_back_the_same() -> None:
    raw = encode_prices(PUBLISHED)
    assert json.loads(raw) == {
        "simulated": True,
        "simulated_by": "a recorded trace",
        "gpus": [
            {
                "uuid": "GPU-a",
                "name": "NVIDIA H100 80GB HBM3",
                "usd_per_hour": "6.880001",
                "upper_bound": None,
            },
            {"uuid": "GPU-b", "name": "Mystery GPU", "usd_per_hour": None, "upper_bound": None},
        ],
        "base_usd_per_hour": "0.5",
        "currency_symbol": "€",
        "currency": "EUR",
        "source": "the server's gcp spot prices",
    }
    assert decode_prices(raw) == PUBLISHED


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[1, 2]",
        '{"gpus": [{"uuid": "GPU-a"}]}',
        '{"gpus": 3}',
        '{"base_usd_per_hour": "a lot"}',
        '{"base_usd_per_hour": null}',
        '{"currency": "dollars"}',
        '{"currency": 5}',
    ],
)
def test_a_payload_of_another_shape_is_not_read(raw: str) -> None:
    # the kernel then prices from the shipped catalog, and says so
    assert decode_prices(raw) is None
    assert kernel_prices.from_environment({ENV_PRICES: raw}) is None


def test_the_kernel_prices_its_cells_at_the_published_prices() -> None:
    environ = {ENV_PRICES: encode_prices(PUBLISHED)}
    assert published_prices(environ) == PUBLISHED
    prices = kernel_prices.from_environment(environ)
    assert prices is not None
    assert prices.from_server is True
    assert prices.gpus == {
        "GPU-a": ("NVIDIA H100 80GB HBM3", Decimal("6.880001")),
        "GPU-b": ("Mystery GPU", None),
    }
    assert prices.rate_per_hour() == Decimal("7.380001")
    assert prices.currency_symbol == "€"
    assert prices.currency == "EUR"
    assert prices.source == "the server's gcp spot prices"
    assert (prices.simulated, prices.simulated_by) == (True, "a recorded trace")
    assert kernel_prices.from_environment({}) is None


@pytest.mark.usefixtures("jp_serverapp")
def test_what_the_server_publishes_is_what_its_kernels_read() -> None:
    prices = kernel_prices.from_environment(os.environ)
    assert prices is not None
    assert prices.source == "the server's aws on-demand prices"
    assert [p for _, p in prices.gpus.values()] == [Decimal("3.431")] * 2
    assert prices.simulated is True
    link = ServerLink.from_environment()
    assert link is not None
    assert link.url == os.environ[ENV_URL]
    assert link.token == os.environ[ENV_TOKEN]


def test_without_a_url_and_a_token_there_is_no_link() -> None:
    assert ServerLink.from_environment({}) is None
    assert ServerLink.from_environment({ENV_URL: "http://127.0.0.1:1/"}) is None
    assert ServerLink.from_environment({ENV_TOKEN: TOKEN}) is None
    link = ServerLink.from_environment(
        {ENV_URL: "http://127.0.0.1:1/user/ada", ENV_TOKEN: TOKEN}, timeout_s=0.5
    )
    assert link is not None
    assert (link.url, link.token, link.timeout_s) == ("http://127.0.0.1:1/user/ada/", TOKEN, 0.5)


#: what the stub answers on the status route: (status, content type, body)
ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "ok": (200, "application/json", json.dumps({"cost_usd": 1.5}).encode()),
    "refused": (403, "application/json", json.dumps({"message": "not this token"}).encode()),
    "crashed": (500, "text/html", b"<html>boom</html>"),
    "not-json": (200, "text/html", b"<html>a proxy's page</html>"),
    "a-list": (200, "application/json", b"[1, 2]"),
}


@pytest.fixture
def stub() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    """A server mounted under /user/ada/ whose answer the test chooses by the token."""
    seen: list[tuple[str, str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            auth = self.headers.get("Authorization") or ""
            seen.append((self.command, self.path, self.headers.get("Authorization")))
            status, kind, body = ANSWERS[auth.partition(" ")[2]]
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/user/ada/", seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_link_calls_the_route_under_the_base_url_with_the_token(
    stub: tuple[str, list[tuple[str, str, str | None]]],
) -> None:
    url, seen = stub
    assert ServerLink(url, "ok").status() == {"cost_usd": 1.5}
    assert fetch_status(url, "ok") == {"cost_usd": 1.5}
    assert seen == [("GET", "/user/ada/gpucost/api/status", "token ok")] * 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("token", "failure", "link_message", "ticker_message"),
    [
        (
            "refused",
            "http",
            "the jupyter-gpucost server answered 403: not this token",
            "the server refused the kernel's token (HTTP 403)",
        ),
        (
            "crashed",
            "http",
            "the jupyter-gpucost server answered 500: Internal Server Error",
            "the server answered HTTP 500",
        ),
        (
            "not-json",
            "unreadable",
            "the jupyter-gpucost server's answer is not JSON "
            "(Expecting value: line 1 column 1 (char 0))",
            "the server's status could not be read (Expecting value: line 1 column 1 (char 0))",
        ),
        (
            "a-list",
            "unexpected",
            "the server's status is not a JSON object",
            "the server's status is not a JSON object",
        ),
    ],
)
def test_each_failure_is_worded_for_its_reader(
    stub: tuple[str, list[tuple[str, str, str | None]]],
    token: str,
    failure: str,
    link_message: str,
    ticker_message: str,
) -> None:
    url, _ = stub
    # the magics print the link's words, the ticker its own
    with pytest.raises(LinkError) as e:
        ServerLink(url, token).status()
    assert e.value.failure == failure
    assert str(e.value) == link_message
    with pytest.raises(StatusError) as shown:
        fetch_status(url, token)
    assert str(shown.value) == ticker_message


def test_a_server_that_is_gone_is_not_reachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    with pytest.raises(LinkError) as e:
        ServerLink(url, TOKEN, timeout_s=2).set_budget(5)
    assert e.value.failure == "unreachable"
    assert str(e.value).startswith("the jupyter-gpucost server is not reachable (")
    assert "refused" in str(e.value)
    with pytest.raises(StatusError) as shown:
        fetch_status(url, TOKEN, timeout_s=2)
    assert str(shown.value).startswith("the server is not reachable (")
