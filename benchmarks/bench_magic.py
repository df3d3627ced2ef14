"""What %%gpucost costs the cell it measures, on the same workload, in one run.

    python benchmarks/bench_magic.py [--cuda] [--repeat 7] [--out results.json]

Runs one torch workload (matrix products; bf16 8192² on CUDA with ``--cuda``, float32
512² on the CPU otherwise) through a real IPython shell: plain, under ``%%time``, under
``%%gpucost`` (light), under ``%%gpucost --ops`` and with ``%gpucost auto on`` (each cell's
record sent to a stand-in server on loopback, as in JupyterLab), alternating, ``--repeat``
times each (each round in its own order), and reports the median wall time of each as a
ratio to the plain cell. The same variants on an empty cell give each one's fixed cost per
cell, in microseconds. Also runs 1,000
light and 200 ``--ops`` cells in a row and reports how much the process grew. With
``--cuda`` it also prints one light and one ``--ops`` report in full. Last, each step of the
light method is timed on its own, on an idle GPU (``light_steps_us``: median microseconds
over 200 runs), so that a fixed cost per cell can be traced to the step that pays it.

Then what the targets need beyond the ratios: a ``time.sleep`` cell (light and ``--ops``)
and the GPU busy time it reports (``sleep_cell_gpu_busy_s``: none on an idle GPU; its span
is ``sleep_cell_gpu_span_s``), and a cell of 2,000 tiny kernels (one-element adds; tiny
operators on the CPU) plain and under ``--ops`` (``tiny_kernels``: the ratio, and whether
the report names the cell's thousands of tiny kernels). The first ``--ops`` cell of the
process is timed apart (``first_ops_cell_s``), with what its report says about the
profiler's first start.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import random
import resource
import statistics
import time
from pathlib import Path
from typing import Any


def stand_in_server() -> tuple[Any, dict[str, int]]:
    """A loopback HTTP server that takes cell records as the Jupyter server does (201).

    It counts them and keeps nothing, so that it adds nothing to the memory measured."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received = {"records": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received["records"] += 1
            self.send_response(201)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def light_steps(repeat: int = 200) -> dict[str, float]:
    """Median microseconds of each step of the light method, each timed on its own."""
    from jupyter_gpucost.kernel.cell import measure
    from jupyter_gpucost.kernel.cell.cuda import torch_cuda

    torch = torch_cuda()
    steps: dict[str, Any] = {
        "energy counters, one read (NVML)": lambda: measure.nvml().energy_j(),
        "energy reader: cell start + end (no NVML call)": lambda: _energy_marks(measure),
        "prices (cached)": measure.prices,
        "whole light measurement, empty cell": lambda: _measured(measure),
    }
    if torch is not None:
        steps["start events + reset peak memory (all GPUs)"] = lambda: measure.start_events(torch)
        events = measure.start_events(torch)

        def end_events() -> None:
            for i in range(torch.cuda.device_count()):
                with torch.cuda.device(i):
                    end = torch.cuda.Event(enable_timing=True)
                    end.record()
                    end.synchronize()
                    events[i].elapsed_time(end)
                    torch.cuda.max_memory_allocated(i)

        steps["end events + synchronise + peak memory (all GPUs)"] = end_events
    report = _measured(measure)
    steps["report as HTML"] = report._repr_html_
    steps["report as text"] = report.__repr__
    out: dict[str, float] = {}
    for name, step in steps.items():
        for _ in range(5):
            step()
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            step()
            samples.append(time.perf_counter() - t0)
        out[name] = statistics.median(samples) * 1e6
    return out


def _energy_marks(measure: Any) -> None:
    reader = measure.energy_reader()
    reader.cell_ended(reader.cell_started())


def _measured(measure: Any) -> Any:
    m = measure.Measurement()
    m.start()
    return m.finish("ok")


def sleep_and_tiny(shell: Any, run: Any, cuda: bool) -> dict[str, Any]:
    """A sleep cell's reported GPU busy time, and a cell of 2,000 tiny kernels."""
    out: dict[str, Any] = {}
    run("%%gpucost -o last_sleep\nimport time\ntime.sleep(2)")
    sleep = shell.user_ns["last_sleep"]
    run("%%gpucost --ops -o last_sleep_ops\nimport time\ntime.sleep(2)")
    sleep_ops = shell.user_ns["last_sleep_ops"]
    out["sleep_cell_gpu_busy_s"] = sleep.gpu_busy_s
    out["sleep_cell_gpu_span_s"] = sleep.gpu_span_s
    out["sleep_cell_ops_gpu_busy_s"] = sleep_ops.gpu_busy_s
    out["sleep_cell_report"] = repr(sleep)
    device = "'cuda'" if cuda else "'cpu'"
    sync = "\ntorch.cuda.synchronize()" if cuda else ""
    run(f"import torch\ntiny = torch.ones(1, device={device})")
    body = f"for _ in range(2000):\n    tiny.add_(1){sync}"
    times: dict[str, list[float]] = {"plain": [], "ops": []}
    for _ in range(5):
        for name, source in (("plain", body), ("ops", "%%gpucost --ops -o last_tiny\n" + body)):
            t0 = time.perf_counter()
            run(source)
            times[name].append(time.perf_counter() - t0)
    plain, ops = (statistics.median(times[k]) for k in ("plain", "ops"))
    notes = shell.user_ns["last_tiny"].notes
    out["tiny_kernels"] = {
        "kernels": 2000,
        "plain_s": plain,
        "ops_s": ops,
        "ops_ratio": ops / plain,
        "named_in_report": any("tiny" in n for n in notes),
        "notes": notes,
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--matmuls", type=int, default=50, help="matrix products per cell (CPU: 512², float32)"
    )
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    import os

    from IPython.core.interactiveshell import InteractiveShell

    server, received = stand_in_server()
    os.environ["JUPYTER_GPUCOST_URL"] = f"http://127.0.0.1:{server.server_address[1]}/"
    os.environ["JUPYTER_GPUCOST_TOKEN"] = "bench"
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_gpucost")
    if args.cuda:
        setup = (
            "import torch\n"
            "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
            "b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
            "c = a @ b; torch.cuda.synchronize()"
        )
        body = "for _ in range(100):\n    c = a @ b\ntorch.cuda.synchronize()"
    else:
        setup = "import torch\na = torch.randn(512, 512)\nb = torch.randn(512, 512)"
        body = f"for _ in range({args.matmuls}):\n    c = a @ b"
    result = shell.run_cell(setup)
    assert result.success, result.error_in_exec
    variants = {
        "plain": body,
        "time": "%%time\n" + body,
        "gpucost": "%%gpucost -o last_light\n" + body,
        "gpucost_ops": "%%gpucost --ops --top 5 -o last_ops\n" + body,
        "auto": body,
    }
    shell.run_line_magic("gpucost", "auto off")  # creates the pricer, switched off
    pricer = shell.gpucost_auto
    shell.display_pub.publish = lambda *a, **k: None  # type: ignore[method-assign]

    def run(source: str) -> None:
        # not silent: a silent cell fires no run hooks, so %%gpucost would not report
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_cell(source)

    from jupyter_gpucost.kernel.link import link

    server_link = link()
    assert server_link is not None

    def timed(name: str, source: str) -> float:
        if name == "auto":
            pricer.enable()
        t0 = time.perf_counter()
        run(source)
        elapsed = time.perf_counter() - t0
        if name == "auto":
            pricer.disable()
        # records are sent in the background after a cell: let that finish before the next
        # variant, so that no variant is charged for the one before it (the sending cost
        # itself is measured apart, below)
        server_link.flush()
        return elapsed

    times: dict[str, list[float]] = {k: [] for k in variants}
    # the first --ops cell of the process: the profiler's first start (seconds on a GPU)
    first_ops_s = timed("gpucost_ops", variants["gpucost_ops"])
    first_ops_notes = list(shell.user_ns["last_ops"].notes)
    for _ in range(2):  # warm up every path once
        for name, source in variants.items():
            timed(name, source)
    # each round in its own order: a variant that always followed the same one would carry
    # what that one leaves behind (the GPU's clocks after an idle gap, a profiler teardown)
    order = random.Random(0)
    for _ in range(args.repeat):
        names = list(variants)
        order.shuffle(names)
        for name in names:
            times[name].append(timed(name, variants[name]))
    medians = {k: statistics.median(v) for k, v in times.items()}
    # the reports of the workload itself (the empty cells below would replace them)
    light, ops = shell.user_ns["last_light"], shell.user_ns["last_ops"]
    # the fixed cost per cell: the same variants on an empty cell
    empty: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(200):
        for name, source in variants.items():
            empty[name].append(timed(name, source.replace(body, "pass")))
    empty_median = {k: statistics.median(v) for k, v in empty.items()}
    # what sending one record costs the kernel process (CPU, all threads)
    record = {"cell_id": "c", "started": "2026-11-23T10:00:00+00:00", "wall_s": 1.0}
    cpu0 = time.process_time()
    for _ in range(200):
        server_link.send_cell(dict(record, ended="2026-11-23T10:00:01+00:00", cost_usd=0.0))
        server_link.flush()
    send_cpu_us = (time.process_time() - cpu0) / 200 * 1e6
    out: dict[str, Any] = {
        "device": "cuda" if args.cuda else "cpu",
        "repeat": args.repeat,
        "matmuls": None if args.cuda else args.matmuls,
        "median_s": medians,
        "ratio_to_plain": {k: v / medians["plain"] for k, v in medians.items()},
        "overhead_per_cell_us": {
            k: (v - empty_median["plain"]) * 1e6 for k, v in empty_median.items()
        },
        "auto_records_received": received["records"],
        "send_record_cpu_us": send_cpu_us,
    }
    out["light_report"] = repr(light)
    out["ops_report"] = repr(ops)
    out["light"] = {
        "wall_s": light.wall_s,
        "gpu_span_s": light.gpu_span_s,
        "gpu_busy_s": light.gpu_busy_s,
        "gpu_busy_by": light.gpu_busy_by,
        "peak_memory_bytes": light.peak_memory_bytes,
        "energy_j": light.energy_j,
        "cost_usd": str(light.cost_usd),
        "rate_usd_per_hour": str(light.rate_usd_per_hour),
    }
    out["ops_top"] = [(o.name, o.self_time_s, o.share) for o in ops.ops]
    out["first_ops_cell_s"] = first_ops_s
    out["first_ops_notes"] = first_ops_notes
    out.update(sleep_and_tiny(shell, run, args.cuda))

    def rss_mb() -> float:
        """The process's resident memory now (not its high-water mark), after a collection."""
        gc.collect()
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 2**20

    tiny = "x = 1"
    # Each kind of cell twice in a row, growth measured over each round: the first round
    # includes memory that settles once (the sending thread's allocator arena, caches), the
    # second shows whether it keeps growing. Plain cells are the baseline: IPython itself
    # keeps a little per cell.
    for n, source in (
        ("plain_1000", tiny),
        ("light_1000", "%%gpucost\n" + tiny),
        ("plain_200", tiny),
        ("ops_200", "%%gpucost --ops\n" + tiny),
    ):
        count = 1000 if n.endswith("1000") else 200
        growth = []
        for _ in range(2):
            before = rss_mb()
            for _ in range(count):
                run(source)
            # the records still waiting to be sent are not growth: wait for them
            assert server_link.flush(120), "the stand-in server did not take the records"
            growth.append(round(rss_mb() - before, 3))
        out[f"rss_growth_mb_{n}"] = {"first": growth[0], "second": growth[1]}
    out["light_steps_us"] = light_steps()
    print(out["light_report"])
    print(out["ops_report"])
    print(json.dumps({k: v for k, v in out.items() if not k.endswith("_report")}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
