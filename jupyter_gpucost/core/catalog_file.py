"""The price catalog's TOML file, read and parsed once per content.

The shipped catalog is large (every region's rows); three readers take their tables from it
(:func:`~jupyter_gpucost.core.catalog.load_catalog` the GPU rows,
:mod:`~jupyter_gpucost.core.instance_prices` the instances, :mod:`~jupyter_gpucost.core.
attached_gpus` the VMs). The bytes are read each time, so an edited file is read afresh; a
content already parsed is not parsed again. The parsed tables are shared: readers only read
them.
"""

from __future__ import annotations

import hashlib
import threading
import tomllib
from importlib import resources
from pathlib import Path

#: parsed contents kept (the shipped catalog, and an admin's own, with room to spare)
KEPT = 4


class CatalogError(ValueError):
    """The catalog file cannot be used; the message says which row and why."""


_parsed: dict[str, dict[str, object]] = {}
_lock = threading.Lock()


def read_catalog_toml(path: str | Path | None = None) -> tuple[dict[str, object], str]:
    """The parsed TOML of the shipped catalog or of the file at ``path``, and where it came
    from (for messages). The tables are shared with other readers: never change them."""
    if path:
        try:
            text = Path(path).read_bytes()
        except OSError as e:
            raise CatalogError(f"cannot read price catalog {path}: {e.strerror}") from None
        origin = str(path)
    else:
        text = resources.files("jupyter_gpucost").joinpath("data", "prices.toml").read_bytes()
        origin = "the shipped catalog"
    digest = hashlib.sha256(text).hexdigest()
    with _lock:
        kept = _parsed.get(digest)
    if kept is not None:
        return kept, origin
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CatalogError(f"{origin} is not valid TOML: {e}") from None
    with _lock:
        while len(_parsed) >= KEPT:
            del _parsed[next(iter(_parsed))]
        _parsed[digest] = data
    return data, origin
