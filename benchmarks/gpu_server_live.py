"""Run the server extension on a machine with an NVIDIA GPU, with a kernel doing GPU work.

    python benchmarks/gpu_server_live.py --out-dir OUT [--seconds 40]

Starts ``jupyter server`` with the extension and NVML telemetry on 127.0.0.1, starts a
kernel through the REST API, runs a bf16 matmul loop in it (through the kernel's own
connection file), and saves what every GET route of the extension answered while the
kernel was busy and after it went idle, in ``OUT/server-live.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

GPU_CODE = """
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
print('done', torch.cuda.max_memory_allocated())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument(
        "--routes",
        default="status,kernels,history",
        help="extension routes to read (those that answer 404 are reported as such)",
    )
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
    }
    log = (out / "server.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp}",
            "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
            "--GpuCost.telemetry=nvml",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def call(path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            base + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")[:500]

    report: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if call("/api")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start; see server.log")
            time.sleep(0.5)
        status, kernel = call("/api/kernels", "POST", {"name": "python3"})
        report["kernel_start"] = status
        from jupyter_client import BlockingKernelClient

        client = BlockingKernelClient()
        client.load_connection_file(tmp / "runtime" / f"kernel-{kernel['id']}.json")
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute(GPU_CODE.format(seconds=args.seconds))
        time.sleep(args.seconds / 2)
        for route in args.routes.split(","):
            report[f"busy_{route}"] = call(f"/gpucost/api/{route}")
        request = urllib.request.Request(
            base + "/metrics", headers={"Authorization": f"token {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            report["busy_metrics"] = [
                line
                for line in response.read().decode().splitlines()
                if line.startswith("jupyter_gpucost_")
            ]
        client.get_shell_msg(timeout=args.seconds * 2 + 60)
        time.sleep(5)
        for route in args.routes.split(","):
            report[f"idle_{route}"] = call(f"/gpucost/api/{route}")
        client.stop_channels()
    finally:
        server.terminate()
        server.wait(20)
        (out / "server-live.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, default=str)[:6000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
