"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension enabled."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import traceback
from collections.abc import Iterator

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)

from alert_receivers import http_receiver, smtp  # noqa: E402, F401 - loopback receivers
from postgres import ledger_url, postgres, postgres_url  # noqa: E402, F401 - fixtures
from s3_server import s3_endpoint  # noqa: E402, F401 - a session fixture

#: how long the interpreter may take to exit once the tests are over
EXIT_LIMIT_S = 120


def _stop_orphaned_anyio_workers() -> None:
    """Stop AnyIO's worker threads whose event loop no longer runs: a test's loop closed
    while the task AnyIO stops them with was pending (it never will be done), and nothing
    can give them work again; they would keep the interpreter alive."""
    try:
        from anyio._backends._asyncio import WorkerThread
    except ImportError:
        return
    for thread in threading.enumerate():
        if isinstance(thread, WorkerThread) and not thread.loop.is_running():
            thread.stop()
            thread.join(5)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A run whose tests are over must end: the threads that would keep the interpreter
    alive are named, and if it has not exited within ``EXIT_LIMIT_S`` every thread's stack
    is printed and it exits with a failure (a hang would otherwise pass unnoticed until
    the job's own time limit)."""
    _stop_orphaned_anyio_workers()
    stray = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if stray:
        names = ", ".join(sorted(t.name for t in stray))
        sys.stderr.write(f"threads still running after the tests: {names}\n")
        frames = sys._current_frames()
        for thread in stray:
            frame = frames.get(thread.ident or -1)
            if frame is not None:
                sys.stderr.write(f"--- {thread.name}\n{''.join(traceback.format_stack(frame))}")
    faulthandler.dump_traceback_later(EXIT_LIMIT_S, exit=True)


#: port 9 (discard) on loopback: nothing listens there
CLOSED_METADATA = {
    "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    # the EC2 API botocore calls (a detected AWS spot instance asks its spot price by
    # default): a test that means to answer points it at moto or a stand-in
    "AWS_ENDPOINT_URL_EC2": "http://127.0.0.1:9",
}


#: the Azure Retail Prices API on a closed loopback port
CLOSED_FEED = "http://127.0.0.1:9/api/retail/prices"


@pytest.fixture(autouse=True, scope="session")
def _metadata_on_a_closed_port() -> Iterator[None]:
    """The SDKs' metadata endpoints point at a closed loopback port for every process the
    tests start, so that nothing can reach a real metadata service."""
    saved = {k: os.environ.get(k) for k in CLOSED_METADATA}
    os.environ.update(CLOSED_METADATA)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def no_dmi(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty DMI folder: a machine no cloud claims, so detection never asks a metadata
    service (a test server must not, whatever machine the tests run on)."""
    return str(tmp_path_factory.mktemp("no-dmi"))


@pytest.fixture
def gpucost_config() -> dict[str, object]:
    """The GpuCost traits for the server under test; tests override this fixture."""
    return {"telemetry": "simulated", "sample_interval_s": 0.2}


#: a test's GpuCost traits that choose its prices' region themselves
NAMES_ITS_PRICES = {"price_provider", "price_region", "dmi_path"}


@pytest.fixture
def jp_server_config(gpucost_config: dict[str, object], no_dmi: str) -> dict[str, object]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_gpucost": True}},
        # a test that names a DMI folder gets it; the others get an empty one
        # a detected Azure VM asks the Retail Prices API by default: a closed loopback
        # port, unless the test serves the recorded answers
        "GpuCost": {
            "dmi_path": no_dmi,
            "azure_prices_url": CLOSED_FEED,
            # prices are per region: the default provider's us-east-1 rows, unless the test
            # names a provider, a region or a machine of its own
            **({} if NAMES_ITS_PRICES & set(gpucost_config) else {"price_region": "us-east-1"}),
            **gpucost_config,
        },
    }
