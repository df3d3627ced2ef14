"""Reading the shipped price catalog at start-up: the three readers against one parse.

A server and the hub read three tables of the shipped catalog at start (GPU rows, instance
rows, VM rows). Each reader used to parse the TOML file itself; now a content is parsed once
(:mod:`jupyter_gpucost.core.catalog_file`). Each figure is the median of ``--rounds`` runs in a
fresh child process (so nothing is cached from the round before):

* **one parse**: ``tomllib`` parses the file once (the peer: the least any reader can do);
* **three readers**: ``load_catalog``, ``load_instance_rows`` and ``load_vm_rows``, as a
  server starting up calls them;
* **three readers, each parsing**: the same with the shared parse cleared before each
  reader (as the code was before).

It prints the seconds of each and the ratio, as JSON::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_catalog.py
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from importlib import resources


def _one_parse(out: multiprocessing.Queue[float]) -> None:
    import tomllib

    text = resources.files("jupyter_gpucost").joinpath("data", "prices.toml").read_bytes()
    t0 = time.perf_counter()
    tomllib.loads(text.decode("utf-8"))
    out.put(time.perf_counter() - t0)


def _three_readers(out: multiprocessing.Queue[float], each_parses: bool = False) -> None:
    from jupyter_gpucost.core import catalog_file
    from jupyter_gpucost.core.attached_gpus import load_vm_rows
    from jupyter_gpucost.core.catalog import load_catalog
    from jupyter_gpucost.core.instance_prices import load_instance_rows

    t0 = time.perf_counter()
    for reader in (load_catalog, load_instance_rows, load_vm_rows):
        if each_parses:  # as before the parse was shared
            catalog_file._parsed.clear()
        reader()
    out.put(time.perf_counter() - t0)


def _three_readers_each_parsing(out: multiprocessing.Queue[float]) -> None:
    _three_readers(out, each_parses=True)


def _median(target: object, rounds: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    times = []
    for _ in range(rounds):
        queue: multiprocessing.Queue[float] = ctx.Queue()
        child = ctx.Process(target=target, args=(queue,))
        child.start()
        times.append(queue.get(timeout=120))
        child.join(30)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    size = len(resources.files("jupyter_gpucost").joinpath("data", "prices.toml").read_bytes())
    parse_s = _median(_one_parse, args.rounds)
    readers_s = _median(_three_readers, args.rounds)
    each_s = _median(_three_readers_each_parsing, args.rounds)
    print(
        json.dumps(
            {
                "catalog_bytes": size,
                "one_parse_s": round(parse_s, 4),
                "three_readers_s": round(readers_s, 4),
                "ratio": round(readers_s / parse_s, 2),
                "three_readers_each_parsing_s": round(each_s, 4),
                "ratio_each_parsing": round(each_s / parse_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
