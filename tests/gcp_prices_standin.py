"""A loopback stand-in for raw.githubusercontent.com serving the recorded datasets of
``scripts/gcp_prices.py`` (tests/data/gcp_prices, README there says where each comes from)
at the paths GitHub serves them from; any other path is a 404, as GitHub answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).parent / "data" / "gcp_prices"
FILES = {
    "/skypilot-org/skypilot-catalog/006059e0f18acb1341e22a27751e9f80df6ba92f/"
    "catalogs/v8/gcp/vms.csv": DATA / "vms.csv",
    "/Cyclenerd/google-cloud-pricing-cost-calculator/fd66b26ff84fee5cdd94f341ea89206e76c06b99/"
    "pricing.yml": DATA / "pricing.yml",
}


@dataclass
class Raw:
    url: str
    seen: list[str] = field(default_factory=list)


def serve() -> Iterator[Raw]:
    raw = Raw(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            raw.seen.append(self.path)
            path = FILES.get(self.path)
            body = path.read_bytes() if path else b"404: Not Found"
            self.send_response(200 if path else 404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    raw.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield raw
    finally:
        server.shutdown()
        server.server_close()
