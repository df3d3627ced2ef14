"""A stand-in for Azure's Retail Prices API on loopback, serving recorded items.

It answers ``GET /api/retail/prices?$filter=...&$skip=N`` as the API does: the items the
filter selects (``serviceName``, ``priceType``, ``armRegionName`` and ``armSkuName`` terms,
``eq`` only, ``or`` between sizes), in pages of ``page_size`` (the API's is 100), each page
naming the next in ``NextPageLink`` (``null`` on the last one).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

RECORDED = Path(__file__).parent / "data" / "azure_retail_prices" / "eastus-gpu-vms.json"
_TERM = re.compile(r"(\w+) eq '([^']*)'")
#: the filter's field names -> the item's
_FIELDS = {"priceType": "type"}


def recorded_items() -> list[dict[str, Any]]:
    items = json.loads(RECORDED.read_text())["Items"]
    assert isinstance(items, list)
    return items


@dataclass
class Feed:
    items: list[dict[str, Any]] = field(default_factory=recorded_items)
    page_size: int = 100
    #: where NextPageLink points (``""``: this stand-in)
    next_origin: str = ""
    #: every path and query asked
    asked: list[str] = field(default_factory=list)


def _select(items: list[dict[str, Any]], odata: str) -> list[dict[str, Any]]:
    wanted: dict[str, set[str]] = {}
    for name, value in _TERM.findall(odata):
        wanted.setdefault(_FIELDS.get(name, name), set()).add(value)
    return [i for i in items if all(str(i.get(k)) in v for k, v in wanted.items())]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        feed = self.server.feed
        feed.asked.append(self.path)
        parts = urlsplit(self.path)
        if parts.path != "/api/retail/prices":
            self._send(404, {"Error": {"Code": "NotFound"}})
            return
        query = parse_qs(parts.query)
        odata = query.get("$filter", [""])[0]
        skip = int(query.get("$skip", ["0"])[0])
        selected = _select(feed.items, odata)
        page = selected[skip : skip + feed.page_size]
        more = skip + feed.page_size < len(selected)
        origin = feed.next_origin or f"http://{self.headers['Host']}"
        link = (
            f"{origin}{parts.path}?{urlencode({'$filter': odata, '$skip': skip + feed.page_size})}"
        )
        body = {
            "BillingCurrency": "USD",
            "CustomerEntityId": "Default",
            "CustomerEntityType": "Retail",
            "Items": page,
            "NextPageLink": link if more else None,
            "Count": len(page),
        }
        self._send(200, body)

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    feed: Feed


@dataclass
class AzurePrices:
    #: the feed's address, as RETAIL_PRICES_URL names the real one
    url: str
    feed: Feed


def serve(feed: Feed | None = None) -> Iterator[AzurePrices]:
    """Serve the stand-in on a free loopback port until the generator is closed."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.feed = feed or Feed()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/retail/prices"
    try:
        yield AzurePrices(url, server.feed)
    finally:
        server.shutdown()
        server.server_close()
