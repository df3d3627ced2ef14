"""Two real kernels on a real GPU under the server: shares, sums, the sampler's CPU, pids.

    python benchmarks/gpu_kernels_live.py --out-dir OUT [--seconds 60] [--pid-namespace]
    python benchmarks/gpu_kernels_live.py --out-dir OUT --cpu    # the script's own plumbing

On a machine with an NVIDIA GPU (the wheels of jupyter_server, ipykernel and SQLAlchemy on
``PYTHONPATH``), it measures, in this order, and writes ``OUT/kernels-live[-pidns].json``:

1. ``alloc``: whether a ``cuMemAlloc`` of N MiB in a process's existing context (made as
   the kernel's GPU probe makes it, :class:`jupyter_gpucost.kernel.gpu_identity.LibCuda`)
   moves NVML's used memory for that process by exactly N MiB, for several probe sizes.
2. Starts ``jupyter server`` with the extension and NVML telemetry (the default 1 s
   sampler), and two kernels through ``/api/sessions``: one multiplies bf16 8192² matrices
   without pause, one holds 8 GiB and never computes. Both load the IPython extension, as
   a notebook that uses ``%gpucost`` does.
3. ``window``: for ``--seconds`` the server process's CPU time (its own, not its kernels')
   and each kernel's cost from the kernels route at the window's ends: the busy kernel's
   share of what the two were charged in the window, and whether kernels + not attributed
   + idle = the session, exactly, at every read.
4. ``pids``: the pids NVML lists, the pids each kernel reads with ``os.getpid()``, and the
   same processes' pids as this script sees them.
5. ``child``: the idle kernel starts a child process that takes 1 GiB on the GPU; what
   ``nvmlDeviceGetComputeRunningProcesses`` lists then, and how the kernels route counts it.
6. ``nvml_calls``: the cost of each NVML call the sampler makes, timed in this process
   while the busy kernel computes (per-process utilisation included), against the
   sampler's interval.

With ``--pid-namespace`` the server (and so its kernels) runs in a new PID namespace
(``unshare --pid --fork --mount-proc``): what a container is to NVML, whose pids are then
not the server's. The kernels must identify their GPU processes through the server's probe
(``gpu_host_pids`` in the kernels route), and the shares must hold as above.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

MiB = 1024**2
#: probe sizes to check (the server draws from 8 MiB to 260 MiB in steps of 4 MiB)
ALLOC_SIZES_MIB = (8, 12, 100, 132, 260)

ALLOC_CHECK = """
import json, sys, time, os
import torch
import pynvml
from jupyter_gpucost.kernel.gpu_identity import LibCuda
torch.ones(1, device='cuda'); torch.cuda.synchronize()
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
me = os.getpid()

def used():
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if p.pid == me:
            return p.usedGpuMemory
    return None

cuda = LibCuda()
(ordinal, uuid), = [a for a in cuda.active() if a[0] == 0]
rows = []
for mib in SIZES:
    time.sleep(0.3)
    before = used()
    block = cuda.allocate(ordinal, mib * 1024**2)
    held = []
    for wait in (0.05, 0.3, 1.0):
        time.sleep(wait)
        held.append(used())
    cuda.free(ordinal, block)
    after = []
    for wait in (0.05, 0.3, 1.0):
        time.sleep(wait)
        after.append(used())
    rows.append({"mib": mib, "before": before, "held": held, "after": after,
                 "moved_bytes": [h - before for h in held],
                 "exact": all(h - before == mib * 1024**2 for h in held[1:])
                          and all(a == before for a in after[1:])})
print(json.dumps({"pid": me, "uuid": uuid, "rows": rows}))
"""

SETUP_BUSY = """
import os, time
get_ipython().run_line_magic('load_ext', 'jupyter_gpucost')
import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
c = a @ b; torch.cuda.synchronize()
print(os.getpid())
"""
LOOP_BUSY = """
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""
SETUP_IDLE = """
import os, time
get_ipython().run_line_magic('load_ext', 'jupyter_gpucost')
import torch
held = torch.empty(8 * 1024**3, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize()
print(os.getpid())
"""
CPU_SETUP = """
import os, time
get_ipython().run_line_magic('load_ext', 'jupyter_gpucost')
print(os.getpid())
"""
CPU_LOOP = (
    "end = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    sum(range(10**5))\n"
)
CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, '-c', {code!r}])
print(child.pid)
"""
CHILD_CODE = (
    "import time, torch; x = torch.empty(1024**3, dtype=torch.uint8, device='cuda'); "
    "torch.cuda.synchronize(); time.sleep({hold})"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed_calls(fn: Callable[[], object], n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return {
        "n": n,
        "median_ms": statistics.median(samples) * 1e3,
        "p90_ms": samples[int(0.9 * (n - 1))] * 1e3,
        "max_ms": samples[-1] * 1e3,
    }


def nvml_call_costs() -> dict[str, Any]:
    """Each NVML call the sampler makes, timed here (the GPU busy meanwhile)."""
    import pynvml

    from jupyter_gpucost.telemetry.nvml import NvmlSource

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    last = [0]

    def process_utilization() -> None:
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(h, last[0])
        except pynvml.NVMLError:
            return
        if samples:
            last[0] = max(s.timeStamp for s in samples)

    out: dict[str, Any] = {
        "nvmlDeviceGetUtilizationRates": timed_calls(
            lambda: pynvml.nvmlDeviceGetUtilizationRates(h), 200
        ),
        "nvmlDeviceGetMemoryInfo": timed_calls(lambda: pynvml.nvmlDeviceGetMemoryInfo(h), 200),
        "nvmlDeviceGetPowerUsage": timed_calls(lambda: pynvml.nvmlDeviceGetPowerUsage(h), 200),
        "nvmlDeviceGetTotalEnergyConsumption": timed_calls(
            lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h), 30
        ),
        "nvmlDeviceGetComputeRunningProcesses": timed_calls(
            lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h), 200
        ),
        "nvmlDeviceGetProcessUtilization": timed_calls(process_utilization, 40),
    }
    source = NvmlSource()
    source.open()
    try:
        out["NvmlSource.read"] = timed_calls(source.read, 30)
        out["NvmlSource.poll"] = timed_calls(source.poll, 40)
    finally:
        source.close()
    return out


class Server:
    """``jupyter server`` with the extension, optionally in a PID namespace of its own."""

    def __init__(self, out: Path, pid_namespace: bool, telemetry: str) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.port, self.token = free_port(), secrets.token_hex(16)
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(self.tmp / "config"),
            "JUPYTER_DATA_DIR": str(self.tmp / "data"),
            "JUPYTER_RUNTIME_DIR": str(self.tmp / "runtime"),
        }
        argv = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.tmp}",
            "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
            f"--GpuCost.telemetry={telemetry}",
            "--GpuCost.minimum_charge_s=0",
            "--GpuCost.ledger_url=none",
        ]
        if pid_namespace:
            argv = ["unshare", "--pid", "--fork", "--mount-proc", *argv]
        self.log = (out / ("server-pidns.log" if pid_namespace else "server.log")).open("wb")
        self.popen = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"

    def call(self, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")[:500]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while True:
            try:
                if self.call("/api")[0] == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.popen.poll() is not None:
                raise SystemExit("the server did not start; see the server log")
            time.sleep(0.5)

    def process(self) -> Any:
        """The server's own process (under unshare: its child)."""
        import psutil

        proc = psutil.Process(self.popen.pid)
        if "unshare" in " ".join(proc.cmdline()):
            deadline = time.monotonic() + 10
            while not proc.children() and time.monotonic() < deadline:
                time.sleep(0.1)
            return proc.children()[0]
        return proc

    def stop(self) -> None:
        # the server itself: under unshare it is the namespace's first process, whose end
        # ends its kernels too (unshare does not pass a signal on)
        try:
            self.process().terminate()
        except Exception:
            self.popen.terminate()
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()


class Kernel:
    def __init__(self, server: Server, path: str) -> None:
        from jupyter_client import BlockingKernelClient

        status, session = server.call(
            "/api/sessions",
            "POST",
            {"path": path, "type": "notebook", "kernel": {"name": "python3"}},
        )
        assert status == 201, (status, session)
        self.id = session["kernel"]["id"]
        self.client = BlockingKernelClient()
        self.client.load_connection_file(server.tmp / "runtime" / f"kernel-{self.id}.json")
        self.client.start_channels()
        self.client.wait_for_ready(timeout=90)

    def run(self, code: str, timeout: float = 120) -> str:
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        self.client.execute_interactive(code, output_hook=hook, timeout=timeout)
        return "".join(out)

    def start(self, code: str) -> None:
        """Run ``code`` without waiting for it (a long cell)."""
        self.client.execute(code)


def exact(answer: dict[str, Any]) -> bool:
    micro = answer["micro_usd"]
    kernels = sum(k["cost_micro_usd"] for k in answer["kernels"])
    return bool(kernels + micro["unattributed"] + micro["idle"] == micro["total"])


def kernel_costs(answer: dict[str, Any]) -> dict[str, int]:
    return {k["id"]: int(k["cost_micro_usd"]) for k in answer["kernels"]}


def nvml_processes() -> list[dict[str, int]]:
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    return [
        {"pid": p.pid, "used_bytes": p.usedGpuMemory}
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    ]


def host_pids_of_kernels(server: Server) -> dict[str, int]:
    """Each kernel's pid as this script (outside any namespace) sees it, by its connection file."""
    out = {}
    for child in server.process().children():
        cmd = " ".join(child.cmdline())
        if "kernel-" in cmd:
            out[cmd.split("kernel-")[1].split(".json")[0]] = child.pid
    return out


def session(args: argparse.Namespace, out: Path, report: dict[str, Any]) -> None:
    telemetry = "simulated" if args.cpu else "nvml"
    server = Server(out, args.pid_namespace, telemetry)
    kernels: list[Kernel] = []
    try:
        server.wait_ready()
        busy, idle = Kernel(server, "busy.ipynb"), Kernel(server, "idle.ipynb")
        kernels += [busy, idle]
        pid_busy = busy.run(CPU_SETUP if args.cpu else SETUP_BUSY).strip()
        pid_idle = idle.run(CPU_SETUP if args.cpu else SETUP_IDLE).strip()
        loop = CPU_LOOP if args.cpu else LOOP_BUSY
        busy.start(loop.format(seconds=args.seconds + 60))
        report["kernel_ids"] = {"busy": busy.id, "idle": idle.id}
        report["pids"] = {
            "as_kernels_see_them": {"busy": pid_busy, "idle": pid_idle},
            "as_this_script_sees_them": host_pids_of_kernels(server),
        }
        # in a PID namespace, the kernels identify their GPU processes after their first
        # cell: give the probes their time (a few sampler readings each)
        waited = time.monotonic()
        deadline = waited + (40 if args.pid_namespace else 5)
        while time.monotonic() < deadline:
            answer = server.call("/gpucost/api/kernels")[1]
            rows = answer["kernels"]
            if len(rows) == 2 and (not args.pid_namespace or all(k["gpu_host_pids"] for k in rows)):
                break
            time.sleep(1)
        report["identified_after_s"] = round(time.monotonic() - waited, 1)
        report["kernels_route_before_window"] = answer
        if not args.cpu:
            report["pids"]["nvml"] = nvml_processes()
        proc = server.process()
        first = server.call("/gpucost/api/kernels")[1]
        cpu0, t0 = proc.cpu_times(), time.monotonic()
        reads, all_exact = 0, exact(first)
        end = t0 + args.seconds
        while time.monotonic() < end:
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
            answer = server.call("/gpucost/api/kernels")[1]
            reads += 1
            all_exact = all_exact and exact(answer)
        cpu1, t1 = proc.cpu_times(), time.monotonic()
        last = answer
        before, after = kernel_costs(first), kernel_costs(last)
        delta = {
            name: after[k.id] - before.get(k.id, 0) for name, k in (("busy", busy), ("idle", idle))
        }
        charged = sum(delta.values())
        report["window"] = {
            "seconds": t1 - t0,
            "server_cpu_s": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
            "server_cpu_share_of_one_core": ((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system))
            / (t1 - t0),
            "server_threads": proc.num_threads(),
            "kernel_cost_delta_micro_usd": delta,
            "busy_share": delta["busy"] / charged if charged else None,
            "all_sums_exact": all_exact and exact(last),
            "reads": reads + 1,
            "kernels_route_at_end": last,
        }
        report["status_at_end"] = server.call("/gpucost/api/status")
        if not args.cpu:
            report["child"] = child_check(server, idle, pid_idle)
            report["nvml_calls"] = nvml_call_costs()
            report["nvml_calls"]["sampler_interval_s"] = 1.0
    finally:
        for k in kernels:
            k.client.stop_channels()
        server.stop()


def child_check(server: Server, idle: Kernel, idle_pid: str) -> dict[str, Any]:
    """A process the idle kernel starts, holding 1 GiB: NVML's list and the route's count."""
    child_pid = idle.run(CHILD.format(code=CHILD_CODE.format(hold=25))).strip()
    deadline = time.monotonic() + 20
    listed = nvml_processes()
    while time.monotonic() < deadline and len(listed) < 3:
        time.sleep(0.5)
        listed = nvml_processes()
    time.sleep(3)  # a few sampler readings with the child on the GPU
    import psutil

    host_child = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "device='cuda'); torch.cuda.synchronize(); time.sleep"
        in " ".join(p.info["cmdline"] or ())
    ]
    return {
        "child_pid_as_kernel_sees_it": child_pid,
        "child_pid_as_this_script_sees_it": host_child,
        "idle_kernel_pid_as_it_sees_itself": idle_pid,
        "nvml_processes": listed,
        "kernels_route": server.call("/gpucost/api/kernels")[1],
    }


def alloc_check(out: Path) -> dict[str, Any]:
    code = ALLOC_CHECK.replace("SIZES", repr(ALLOC_SIZES_MIB))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return {"error": done.stderr[-3000:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["all_exact"] = all(r["exact"] for r in result["rows"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pid-namespace", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="no GPU: check the plumbing only")
    parser.add_argument("--skip-alloc", action="store_true")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = "kernels-live-pidns.json" if args.pid_namespace else "kernels-live.json"
    report: dict[str, Any] = {"args": vars(args)}
    try:
        if not args.cpu:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            report["gpu"] = {
                "name": pynvml.nvmlDeviceGetName(h),
                "driver": pynvml.nvmlSystemGetDriverVersion(),
                "nvml_py": getattr(pynvml, "__version__", None),
            }
            if not args.skip_alloc:
                report["alloc"] = alloc_check(out)
        session(args, out, report)
    finally:
        (out / name).write_text(json.dumps(report, indent=2, default=str))
    summary = {k: v for k, v in report.get("window", {}).items() if k != "kernels_route_at_end"}
    print(
        json.dumps(
            {"summary": summary, "alloc_exact": report.get("alloc", {}).get("all_exact")},
            default=str,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
