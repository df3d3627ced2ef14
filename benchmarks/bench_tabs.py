"""Benchmark: what open JupyterLab tabs cost the server, pushed (ours) against polled.

One real ``jupyter lab`` server (a subprocess on 127.0.0.1, its own config and data
directories) runs with jupyter-gpucost (simulated telemetry, sampling every second) and
jupyter-resource-usage. Headless Chromium opens 1, then 3, then 10 JupyterLab tabs; after
each step, in a steady window (tabs loaded, nothing clicked), it counts:

- requests per tab per minute to ``/gpucost/`` (ours: the status is pushed on the event
  bus; the target is 0) and to ``/api/metrics/`` (jupyter-resource-usage's front end polls
  its route from every tab);
- how often the cost shown in the first tab's status bar changes (largest and median gap
  between two changes, from a MutationObserver in the page);
- the server process's CPU time per minute, and per tab above the same server with no tab.

The run is done twice on fresh servers: once with only jupyter-gpucost's front end enabled
(jupyter-resource-usage's server side still loaded), once with only
jupyter-resource-usage's front end, so that the server CPU each front end's tabs cost can
be compared as a ratio in the same run.

Run from the repository root::

    .venv/bin/python benchmarks/bench_tabs.py [--window-s 30] [--tabs 1,3,10] [--out f.json]

Needs Chromium at /usr/bin/chromium (or GPUCOST_CHROMIUM), playwright, psutil and
jupyter-resource-usage (the ``bench`` and ``test`` extras). Everything it starts is stopped
at the end, also on failure; it takes about (2 x (4 windows + loading)) minutes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

HOST = "127.0.0.1"
CHROMIUM = os.environ.get("GPUCOST_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # every tab counts as on screen, as a person's tabs in separate windows would
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]
OURS = "jupyter-gpucost"
THEIRS = "@jupyter-server/resource-usage"
STATUS_ITEM = "#jp-gpucost-status"

# installed once per page; each window empties the list
WATCH = """() => {
  window.__gpucostChanges = [];
  if (window.__gpucostWatching) { return; }
  window.__gpucostWatching = true;
  const node = document.querySelector('#jp-gpucost-status .jp-gpucost-cost');
  let last = node ? node.textContent : null;
  const item = document.querySelector('#jp-gpucost-status');
  new MutationObserver(() => {
    const now = document.querySelector('#jp-gpucost-status .jp-gpucost-cost');
    const text = now ? now.textContent : null;
    if (text !== last) { last = text; window.__gpucostChanges.push(performance.now()); }
  }).observe(item, {subtree: true, childList: true, characterData: true});
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@contextmanager
def lab_server(tmp: Path, disabled: str) -> Iterator[tuple[str, str, psutil.Process]]:
    """A ``jupyter lab`` with one front end disabled (page_config), stopped at the end."""
    port, token = free_port(), secrets.token_hex(16)
    config = tmp / "config"
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {disabled: True}})
    )
    (tmp / "root").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    log = (tmp / "lab.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp / 'root'}",
            "--GpuCost.telemetry=simulated",
            "--GpuCost.sample_interval_s=1",
            "--GpuCost.minimum_charge_s=0",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "lab.log").read_text()[-3000:])
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).read()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        yield url, token, psutil.Process(process.pid)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        log.close()


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def run(front_end: str, tab_counts: list[int], window_s: float) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    disabled = THEIRS if front_end == OURS else OURS
    steps: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="gpucost-tabs-") as tmp,
        lab_server(Path(tmp), disabled) as (url, token, server),
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            requests: list[tuple[float, str]] = []
            context.on(
                "request",
                lambda r: (
                    requests.append((time.monotonic(), r.url))
                    if "/gpucost/" in r.url or "/api/metrics/" in r.url
                    else None
                ),
            )
            pages: list[Any] = []
            # the first tab's status pushes, as frames on its event socket
            pushes: list[float] = []

            def on_socket(ws: Any) -> None:
                if "/api/events/subscribe" in ws.url:
                    ws.on(
                        "framereceived",
                        lambda frame: (
                            pushes.append(time.monotonic())
                            if "jupyter-gpucost.org/status/v1" in str(frame)
                            else None
                        ),
                    )

            def window(tabs: int) -> dict[str, Any]:
                if pages and front_end == OURS:
                    pages[0].evaluate(WATCH)
                start, cpu0 = time.monotonic(), cpu_s(server)
                # wait through Playwright so that request events are delivered meanwhile
                (pages[0] if pages else context.new_page()).wait_for_timeout(window_s * 1000)
                end, cpu1 = time.monotonic(), cpu_s(server)
                minutes = (end - start) / 60
                seen = [u for t, u in requests if start <= t <= end]
                ours = sum("/gpucost/" in u for u in seen)
                theirs = sum("/api/metrics/" in u for u in seen)
                step: dict[str, Any] = {
                    "tabs": tabs,
                    "window_s": round(end - start, 1),
                    "server_cpu_s_per_min": round((cpu1 - cpu0) / minutes, 3),
                    "gpucost_requests_per_tab_per_min": round(ours / max(tabs, 1) / minutes, 2),
                    "metrics_requests_per_tab_per_min": round(theirs / max(tabs, 1) / minutes, 2),
                }
                if pages and front_end == OURS:
                    changes = pages[0].evaluate("window.__gpucostChanges")
                    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(changes)]
                    step["shown_amount_changes"] = len(changes)
                    step["shown_amount_gap_s_max"] = round(max(gaps), 2) if gaps else None
                    step["shown_amount_gap_s_median"] = (
                        round(statistics.median(gaps), 2) if gaps else None
                    )
                    received = [t for t in pushes if start <= t <= end]
                    push_gaps = [b - a for a, b in itertools.pairwise(received)]
                    step["status_pushes_first_tab"] = len(received)
                    step["status_push_gap_s_max"] = round(max(push_gaps), 2) if push_gaps else None
                    step["status_push_gap_s_median"] = (
                        round(statistics.median(push_gaps), 2) if push_gaps else None
                    )
                    text = pages[0].locator(STATUS_ITEM).inner_text()
                    step["shown_at_end"] = text.strip()
                return step

            steps.append(window(0))
            for count in tab_counts:
                while len(pages) < count:
                    page = context.new_page()
                    if not pages:
                        page.on("websocket", on_socket)
                    page.goto(f"{url}/lab?token={token}", timeout=120_000)
                    if front_end == OURS:
                        page.locator(STATUS_ITEM).wait_for(state="visible", timeout=120_000)
                    else:
                        page.locator(".jp-StatusBar-Widget").wait_for(timeout=120_000)
                    pages.append(page)
                pages[0].wait_for_timeout(5_000)  # loaded, settled
                steps.append(window(count))
            baseline = steps[0]["server_cpu_s_per_min"]
            for step in steps[1:]:
                step["server_cpu_s_per_min_per_tab"] = round(
                    (step["server_cpu_s_per_min"] - baseline) / step["tabs"], 4
                )
        finally:
            browser.close()
    return {"front_end": front_end, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--tabs", default="1,3,10")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tab_counts = [int(n) for n in args.tabs.split(",")]
    results = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        ),
        "window_s": args.window_s,
        "runs": [run(OURS, tab_counts, args.window_s), run(THEIRS, tab_counts, args.window_s)],
    }
    ours, theirs = (r["steps"] for r in results["runs"])
    results["ratios"] = [
        {
            "tabs": a["tabs"],
            "requests_ours_over_theirs": round(
                a["gpucost_requests_per_tab_per_min"]
                / max(b["metrics_requests_per_tab_per_min"], 1e-9),
                3,
            ),
            "server_cpu_per_tab_ours_over_theirs": round(
                a["server_cpu_s_per_min_per_tab"] / b["server_cpu_s_per_min_per_tab"], 3
            )
            if b["server_cpu_s_per_min_per_tab"] > 0
            else None,
        }
        for a, b in zip(ours[1:], theirs[1:], strict=True)
    ]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
