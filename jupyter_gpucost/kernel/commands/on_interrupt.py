"""``%gpucost on-interrupt <code>``: code the server runs in this kernel when the cloud
takes a spot machine back (docs/spot.md), for a notebook without a training guard.

The code is kept where the server looks at the notice (``GPUCOST_INTERRUPTION_DIR``) under
this kernel's id. At the notice the server lets the guards answer first, interrupts this
kernel if it is still busy, then runs the code here with a deadline that leaves time for
the export and the record. ``%gpucost on-interrupt off`` forgets it; ``%gpucost
on-interrupt`` shows it.
"""

from __future__ import annotations

import os
from pathlib import Path

from IPython.core.error import UsageError

from ...core.i18n import _
from ...core.interruption_files import ENV_NAME, code_name, read_json, write_json
from ..link import kernel_id
from .usage import usage_of

USAGE = usage_of("on-interrupt")


def _where() -> Path | None:
    folder = os.environ.get(ENV_NAME, "")
    kernel = kernel_id()
    if not folder or kernel is None:
        return None
    return Path(folder) / code_name(kernel)


def on_interrupt(code: str) -> str:
    """Keep, forget or show the code; the sentence to show."""
    code = code.strip()
    where = _where()
    if where is None:
        if code in ("", "off"):
            return _("no code is kept to run at an interruption")
        raise UsageError(
            _(
                "this kernel's server does not watch for a spot interruption (the machine "
                "is not detected as spot, or the server does not have jupyter-gpucost): "
                "the code would never run"
            )
            + f"\nusage: {USAGE}"
        )
    if code == "off":
        where.unlink(missing_ok=True)
        return _("the code to run at an interruption is forgotten")
    if not code:
        kept = read_json(where)
        if kept is None or not isinstance(kept.get("code"), str):
            return _("no code is kept to run at an interruption")
        return _("at an interruption this runs: {code}").format(code=kept["code"])
    try:
        compile(code, "<on-interrupt>", "exec")
    except SyntaxError as e:
        raise UsageError(f"{e}\nusage: {USAGE}") from None
    write_json(where, {"code": code})
    return _("at an interruption this kernel runs: {code}").format(code=code)
