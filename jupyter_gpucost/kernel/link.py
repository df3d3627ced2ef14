"""The kernel's one client of the jupyter-gpucost server.

The server puts its loopback URL, a token of the kernels' own and the prices in force in the
environment of every kernel it starts (the contract is
:mod:`jupyter_gpucost.core.protocol`). Everything in the kernel that talks to the server goes
through this module: ``%%gpucost`` and auto mode record what each cell cost (the notebook
shows it next to the cell, the panel lists it), ``%gpucost budget`` sets the user's own
budget, ``%gpucost`` and the ticker read the session's status, and the prices come from
:func:`published_prices`. Records are sent from a background thread, so a cell never waits
for the server; without a server nothing is sent.
"""

from __future__ import annotations

import json
import os
import queue
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core.i18n import SOURCE_LANGUAGE, current_language, set_language
from ..core.protocol import (
    BUDGET_PATH,
    CELLS_PATH,
    ENV_LANGUAGE,
    ENV_PRICES,
    ENV_TOKEN,
    ENV_URL,
    PRICES_PATH,
    STATUS_PATH,
    TOKEN_SCHEME,
    PublishedPrices,
    decode_prices,
    read_prices_document,
)

#: records waiting to be sent; beyond this the oldest are dropped (the server is gone)
MAX_PENDING = 1000
DEFAULT_TIMEOUT_S = 5.0

#: why a request failed: the server answered with an HTTP error (``http``), it could not be
#: reached (``unreachable``), the exchange broke off (``broken``), its answer is not JSON
#: (``unreadable``) or not the JSON the route answers (``unexpected``)
Failure = Literal["http", "unreachable", "broken", "unreadable", "unexpected"]

#: a cell's record as the server's ``POST gpucost/api/cells`` takes it (JSON on the wire)
CellRecord = dict[str, Any]
#: completes a record in the sending thread before it is sent (e.g. waits for the GPU)
Finish = Callable[[CellRecord], None]


class LinkError(Exception):
    """The server refused or could not be reached; the message says which.

    ``failure`` says what went wrong, ``http_status`` is the server's answer (``http`` only)
    and ``detail`` the server's message or the network's reason, for callers that word it
    their own way (the ticker)."""

    def __init__(
        self, message: str, failure: Failure, *, http_status: int | None = None, detail: str = ""
    ) -> None:
        super().__init__(message)
        self.failure: Failure = failure
        self.http_status = http_status
        self.detail = detail


def kernel_id() -> str | None:
    """This kernel's id, from its connection file's name (``kernel-<id>.json``)."""
    try:
        from ipykernel import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:
        return None
    if name.startswith("kernel-") and name.endswith(".json"):
        return name[len("kernel-") : -len(".json")]
    return None


def notebook_path() -> str | None:
    """The notebook this kernel runs for, as Jupyter Server tells kernels it starts."""
    return os.environ.get("JPY_SESSION_NAME") or None


def published_prices(environ: Mapping[str, str] | None = None) -> PublishedPrices | None:
    """The prices the server handed to this kernel, or None (no server, or a payload this
    version cannot read)."""
    raw = (os.environ if environ is None else environ).get(ENV_PRICES)
    return decode_prices(raw) if raw else None


def follow_server_language(environ: Mapping[str, str] | None = None) -> str:
    """Write this kernel's output in the language the server handed it (JupyterLab's), or
    English; the language chosen."""
    language = (os.environ if environ is None else environ).get(ENV_LANGUAGE) or ""
    set_language(language or SOURCE_LANGUAGE)
    return current_language()


@dataclass
class _Pending:
    record: CellRecord
    finish: Finish | None


class ServerLink:
    def __init__(self, url: str, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.token = token
        self.timeout_s = timeout_s
        self._queue: queue.Queue[_Pending | None] = queue.Queue(MAX_PENDING)
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.last_error: str | None = None
        # https on loopback uses the server's own certificate, issued for its name
        self._context = ssl._create_unverified_context() if url.startswith("https") else None

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> ServerLink | None:
        """The link the server handed to this kernel, or None (no server with the
        extension started it)."""
        env = os.environ if environ is None else environ
        url, token = env.get(ENV_URL), env.get(ENV_TOKEN)
        if not url or not token:
            return None
        return cls(url, token, timeout_s)

    def request(self, method: str, path: str, body: object = None) -> object:
        """One JSON request to the server with the kernels' token; its JSON answer (None
        when empty), or ``LinkError``."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"{TOKEN_SCHEME} {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout_s, context=self._context
            ) as response:
                text: bytes = response.read()
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read() or b"{}").get("message") or e.reason
            except (ValueError, AttributeError):
                message = e.reason
            raise LinkError(
                f"the jupyter-gpucost server answered {e.code}: {message}",
                "http",
                http_status=e.code,
                detail=str(message),
            ) from None
        except urllib.error.URLError as e:
            raise LinkError(
                f"the jupyter-gpucost server is not reachable ({e.reason})",
                "unreachable",
                detail=str(e.reason),
            ) from None
        except OSError as e:
            # the exchange broke off (a timeout while reading, a reset, TLS)
            reason = getattr(e, "reason", e)
            raise LinkError(
                f"the jupyter-gpucost server is not reachable ({reason})", "broken", detail=str(e)
            ) from None
        if not text:
            return None
        try:
            answer: object = json.loads(text)
        except ValueError as e:
            raise LinkError(
                f"the jupyter-gpucost server's answer is not JSON ({e})",
                "unreadable",
                detail=str(e),
            ) from None
        return answer

    # -- cells, in the background ------------------------------------------------------

    def send_cell(self, record: CellRecord, finish: Finish | None = None) -> None:
        """Queue a cell's record; ``finish(record)`` completes it in the sending thread
        (e.g. waits for the GPU's end-of-cell event) before it is sent."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="gpucost-cell-records", daemon=True
            )
            self._thread.start()
        try:
            self._queue.put_nowait(_Pending(record, finish))
        except queue.Full:
            self.last_error = "too many cell records waiting: the server does not answer"

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if item.finish is not None:
                    item.finish(item.record)
                self.request("POST", CELLS_PATH, item.record)
                self.sent += 1
                self.last_error = None
            except Exception as e:
                self.last_error = str(e)
            finally:
                self._queue.task_done()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until queued records are sent (tests, shutdown); False on timeout."""
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout_s)

    # -- the rest: synchronous, small ----------------------------------------------

    def status(self) -> dict[str, Any]:
        """The session's status, as the status bar reads it (``GET gpucost/api/status``)."""
        result = self.request("GET", STATUS_PATH)
        if not isinstance(result, dict):
            raise LinkError("the server's status is not a JSON object", "unexpected")
        return result

    def prices(self) -> PublishedPrices:
        """The prices in force now (``GET gpucost/api/kernels/prices``): a price the server
        read again (a rental's billed rate) applies to the cells that follow."""
        result = read_prices_document(self.request("GET", PRICES_PATH))
        if result is None:
            raise LinkError("the server's prices are not a prices document", "unexpected")
        return result

    def set_budget(self, amount: float | None, scope: str = "session") -> dict[str, Any]:
        """Set the user's own budget (None removes it); the budget's state afterwards."""
        body: dict[str, Any] = {"amount_usd": amount}
        if amount is not None:
            body["scope"] = scope
        result = self.request("PUT", BUDGET_PATH, body)
        return result if isinstance(result, dict) else {}

    def request_stop(self, action: str | None, reason: str) -> dict[str, Any]:
        """Stop with a budget stop's countdown, save and export (``reason`` "done": the
        cell the user asked to stop after has ended); the budget's state afterwards."""
        body: dict[str, Any] = {"reason": reason}
        if action is not None:
            body["action"] = action
        result = self.request("POST", f"{BUDGET_PATH}/stop", body)
        return result if isinstance(result, dict) else {}


_link: ServerLink | None = None
_checked = False


def link() -> ServerLink | None:
    """This kernel's link to its server, or None (plain IPython, or an older server)."""
    global _link, _checked
    if not _checked:
        _link = ServerLink.from_environment()
        _checked = True
    return _link
