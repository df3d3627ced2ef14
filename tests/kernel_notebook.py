"""Running cells in a real kernel (nbclient) and reading what they showed."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import nbformat
from nbclient import NotebookClient

from jupyter_gpucost.core.protocol import KERNEL_ENV, PricedGpu, PublishedPrices, encode_prices

#: variables the server hands to its kernels; a test sets the ones it needs
SERVER_ENV = KERNEL_ENV

#: what a server on one H100 ($6.88/h) with a $0.50/h instance gives its kernels
H100_SERVER_PRICES = encode_prices(
    PublishedPrices(
        gpus=(PricedGpu("GPU-1", "NVIDIA H100 80GB HBM3", Decimal("6.88")),),
        base_per_hour=Decimal("0.5"),
        currency_symbol="$",
        source="the server's aws on-demand prices",
    )
)


def run_notebook(cells: list[str], env: dict[str, str] | None = None) -> Any:
    """Execute ``cells`` in a fresh python3 kernel; cells with ``# raises`` may fail."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    for cell in nb.cells:
        if "# raises" in cell.source:
            cell.metadata["tags"] = ["raises-exception"]
    saved = dict(os.environ)
    for name in SERVER_ENV:
        os.environ.pop(name, None)
    os.environ.update(env or {})
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def text(cell: Any, *, stream: str | None = None) -> str:
    """What a cell showed as text: streams (or one stream), displays, errors."""
    out = []
    for o in cell.outputs:
        if o.output_type == "stream":
            if stream is None or o.name == stream:
                out.append(o.text)
        elif stream is not None:
            continue
        elif "data" in o:
            out.append(o.data.get("text/plain", ""))
        elif o.output_type == "error":
            out.append(f"{o.ename}: {o.evalue}")
    return "\n".join(out)


def displays(cell: Any, mime: str = "text/plain") -> list[str]:
    return [o.data[mime] for o in cell.outputs if "data" in o and mime in o.data]
