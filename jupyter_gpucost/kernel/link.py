"""The kernel's side of the kernel ↔ server link.

The server puts its loopback URL and a token of the kernels' own in their environment
(``JUPYTER_GPUCOST_URL``, ``JUPYTER_GPUCOST_TOKEN``). With them a kernel reads the
session's status, records what each cell cost (the notebook shows it next to the cell,
the panel lists it), and sets the user's own budget. Records are sent from a background
thread, so a cell never waits for the server; without a server nothing is sent.
"""

from __future__ import annotations

import json
import os
import queue
import ssl
import threading
import urllib.error
import urllib.request
from typing import Any

ENV_URL = "JUPYTER_GPUCOST_URL"
ENV_TOKEN = "JUPYTER_GPUCOST_TOKEN"
#: records waiting to be sent; beyond this the oldest are dropped (the server is gone)
MAX_PENDING = 1000


class LinkError(Exception):
    """The server refused or could not be reached; the message says which."""


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


class ServerLink:
    def __init__(self, url: str, token: str, timeout_s: float = 5.0) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.token = token
        self.timeout_s = timeout_s
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(MAX_PENDING)
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.last_error: str | None = None
        # https on loopback uses the server's own certificate, issued for its name
        self._context = ssl._create_unverified_context() if url.startswith("https") else None

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> ServerLink | None:
        env = os.environ if environ is None else environ
        url, token = env.get(ENV_URL), env.get(ENV_TOKEN)
        if not url or not token:
            return None
        return cls(url, token)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout_s, context=self._context
            ) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read() or b"{}").get("message") or e.reason
            except ValueError:
                message = e.reason
            raise LinkError(f"the jupyter-gpucost server answered {e.code}: {message}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise LinkError(f"the jupyter-gpucost server is not reachable ({reason})") from None
        return json.loads(text) if text else None

    # -- cells, in the background ------------------------------------------------------

    def send_cell(self, record: dict[str, Any], finish: Any = None) -> None:
        """Queue a cell's record; ``finish(record)`` completes it in the sending thread
        (e.g. waits for the GPU's end-of-cell event) before it is sent."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name="gpucost-cell-records", daemon=True
            )
            self._thread.start()
        try:
            self._queue.put_nowait({"record": record, "finish": finish})
        except queue.Full:
            self.last_error = "too many cell records waiting: the server does not answer"

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            record, finish = item["record"], item["finish"]
            try:
                if finish is not None:
                    finish(record)
                self.request("POST", "gpucost/api/cells", record)
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
        result = self.request("GET", "gpucost/api/status")
        if not isinstance(result, dict):
            raise LinkError("the server's status is not a JSON object")
        return result

    def set_budget(self, amount_usd: float | None, scope: str = "session") -> dict[str, Any]:
        body: dict[str, Any] = {"amount_usd": amount_usd}
        if amount_usd is not None:
            body["scope"] = scope
        result = self.request("PUT", "gpucost/api/budget", body)
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
