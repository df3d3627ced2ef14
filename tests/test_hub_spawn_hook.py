"""The spawn hook against budget services that misbehave, on loopback sockets: one that
accepts and never answers, one that resets the connection, one that answers something
that is not an allowance. Each time the admin's ``fail_open`` decides, within the hook's
timeout: refused with a 503 and its message, or let through with the reason logged."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jupyter_gpucost.hub.spawn_hook import SpawnRefused, refuse_over_budget

TIMEOUT_S = 2.0


class _User:
    name = "ann"
    groups: list[Any] = []


class _Spawner:
    user = _User()


def spawn(hook: Callable[[Any], Any]) -> None:
    """Run the hook as the Hub does before a spawn."""

    async def pre_spawn() -> None:
        await hook(_Spawner())

    asyncio.run(pre_spawn())


def _hang(conn: socket.socket) -> None:
    # read the request, answer nothing, keep the connection open until the end
    conn.recv(65536)
    time.sleep(TIMEOUT_S * 4)


def _reset(conn: socket.socket) -> None:
    conn.recv(65536)
    # SO_LINGER 0: the close sends a RST
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def _answer(body: bytes, code: int = 200) -> Callable[[socket.socket], None]:
    def reply(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(
            f"HTTP/1.1 {code} OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )

    return reply


@contextmanager
def service(behaviour: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback socket that accepts connections and treats each with ``behaviour``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                behaviour(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        listener.close()


BEHAVIOURS = {
    "accepts and never answers": _hang,
    "resets the connection": _reset,
    "answers a list": _answer(b"[]"),
    "answers no JSON": _answer(b"<html>proxy error</html>"),
    "answers allowed as text": _answer(b'{"allowed": "no"}'),
    "answers 500": _answer(b'{"message": "boom"}', 500),
}


@pytest.mark.parametrize("fail_open", [False, True])
@pytest.mark.parametrize("what", list(BEHAVIOURS))
def test_the_spawn_hook_does_what_the_admin_chose_when_the_service_misbehaves(
    what: str, fail_open: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with service(BEHAVIOURS[what]) as port:
        hook = refuse_over_budget(
            f"http://127.0.0.1:{port}/services/gpucost/",
            "token",
            fail_open=fail_open,
            timeout_s=TIMEOUT_S,
        )
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, "jupyter_gpucost.hub"):
            if fail_open:
                spawn(hook)
            else:
                with pytest.raises(SpawnRefused) as refused:
                    spawn(hook)
        took = time.monotonic() - began
    # bounded by its timeout (plus the loop's start), never a 500 of tornado's
    assert took < TIMEOUT_S + 3, took
    (line,) = [r.getMessage() for r in caplog.records]
    assert "the budget service" in line
    if fail_open:
        assert "ann may start unchecked (fail_open)" in line
    else:
        assert refused.value.status_code == 503
        assert "budget service is unavailable" in refused.value.jupyterhub_message
        assert "refusing ann's spawn (fail closed)" in line


def test_an_allowance_that_says_no_refuses_with_its_reason() -> None:
    body = b'{"allowed": false, "reason": "Your month budget of $5.00 is spent."}'
    with service(_answer(body)) as port:
        hook = refuse_over_budget(f"http://127.0.0.1:{port}/", "token", fail_open=True)
        with pytest.raises(SpawnRefused) as refused:
            spawn(hook)
    assert refused.value.status_code == 403
    assert refused.value.jupyterhub_message == "Your month budget of $5.00 is spent."


class _Headers(dict[str, str]):
    pass


class _Request:
    def __init__(self, accept_language: str) -> None:
        self.headers = _Headers({"Accept-Language": accept_language})


class _Handler:
    def __init__(self, accept_language: str) -> None:
        self.request = _Request(accept_language)


class _SpawnerFrom(_Spawner):
    """A spawn asked for by a browser (JupyterHub sets ``spawner.handler`` to the request's
    handler before it runs the hook)."""

    def __init__(self, accept_language: str) -> None:
        self.handler = _Handler(accept_language)


def test_the_refusal_is_in_the_language_of_the_browser_that_asked() -> None:
    asked: list[bytes] = []

    def unavailable(conn: socket.socket) -> None:
        asked.append(conn.recv(65536))
        _answer(b"{}", 500)(conn)

    with service(unavailable) as port:
        hook = refuse_over_budget(f"http://127.0.0.1:{port}/", "token")
        with pytest.raises(SpawnRefused) as refused:
            asyncio.run(hook(_SpawnerFrom("zh-CN,zh;q=0.9,en;q=0.8")))
    assert refused.value.jupyterhub_message == (
        "GPU 预算服务不可用，因此现在无法启动任何服务器。请一分钟后重试，或联系您的 Hub 管理员。"  # noqa: RUF001
    )
    # the service is asked for its reason in the same language
    assert b"\r\nAccept-Language: zh-CN\r\n" in asked[0]

    # no request (a spawn the Hub started itself): English
    with service(_answer(b'{"allowed": false}')) as port:
        hook = refuse_over_budget(f"http://127.0.0.1:{port}/", "token")
        with pytest.raises(SpawnRefused) as refused:
            spawn(hook)
    assert refused.value.jupyterhub_message == "Your GPU budget is spent."
