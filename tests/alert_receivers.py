"""Real receivers of alerts on loopback: an SMTP server (aiosmtpd) that keeps the e-mails it
is sent, and an HTTP server that keeps the JSON bodies POSTed to it (by path), the way a
Slack-compatible incoming webhook (Mattermost's ``/hooks/<key>``), Apprise's ``json://``
and our generic ``webhook://`` send them."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope, Session


@dataclass
class Inbox:
    messages: list[Message] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)

    async def handle_DATA(self, server: object, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        self.messages.append(message_from_bytes(content))
        self.recipients.append([str(r) for r in envelope.rcpt_tos])
        return "250 Message accepted for delivery"


@dataclass
class Smtp:
    port: int
    inbox: Inbox

    def mailto(self, to: str) -> str:
        return f"mailto://127.0.0.1:{self.port}/?from=gpucost@example.com&to={to}&mode=insecure"


@pytest.fixture
def smtp() -> Iterator[Smtp]:
    inbox = Inbox()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield Smtp(port, inbox)
    finally:
        controller.stop()


@dataclass
class Posted:
    path: str
    body: Any
    headers: dict[str, str]


class Http:
    def __init__(self) -> None:
        self.posted: list[Posted] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with receiver.lock:
                    receiver.posted.append(Posted(self.path, body, dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def at(self, path: str) -> list[Any]:
        with self.lock:
            return [p.body for p in self.posted if p.path.split("?")[0] == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def http_receiver() -> Iterator[Http]:
    receiver = Http()
    try:
        yield receiver
    finally:
        receiver.close()


def wait_for(check: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """Poll ``check`` until it holds (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
