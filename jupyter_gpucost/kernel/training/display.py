"""How the budget guard shows itself: one line redrawn in place in IPython (at most every
``DISPLAY_EVERY_S``), a line printed now and then outside it (at most every
``PRINT_EVERY_S``, once the step rate is measured), and its budget warning.

IPython is used only when the guard runs in it; it is never imported otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from html import escape
from typing import Protocol

from ...core.i18n import _

#: the live line is redrawn at most this often (seconds)
DISPLAY_EVERY_S = 1.0
#: outside IPython, a progress line is printed at most this often (seconds)
PRINT_EVERY_S = 30.0


class _DisplayHandle(Protocol):
    """What IPython's ``display(..., display_id=True)`` returns: an output to redraw."""

    def update(self, obj: object) -> None: ...


def in_ipython() -> bool:
    """Whether this runs in an IPython shell (a notebook's kernel)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        return ipython.get_ipython() is not None
    except Exception:
        return False


class GuardHtml:
    """Text and HTML for one displayed line."""

    def __init__(self, text: str, warning: bool = False) -> None:
        self.text = text
        self.warning = warning

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        style = "color:var(--jp-warn-color0,#b45309);" if self.warning else ""
        # tex2jax_ignore: the dollar amounts must not be typeset as LaTeX by JupyterLab
        return (
            f"<div class='jp-gpucost-guard tex2jax_ignore mathjax_ignore' style='{style}'>"
            f"{escape(self.text)}</div>"
        )


def _display(obj: object, *, display_id: bool = False) -> _DisplayHandle | None:
    from IPython.display import display

    if not display_id:
        display(obj)  # type: ignore[no-untyped-call]
        return None
    handle: _DisplayHandle = display(obj, display_id=True)  # type: ignore[no-untyped-call]
    return handle


def show_warning(message: str) -> None:
    """The budget warning, under the cell (IPython) or on standard output."""
    if in_ipython():
        _display(GuardHtml(_("budget warning: {message}").format(message=message), warning=True))
    else:
        text = _("budget warning: {message}").format(message=message)
        print(f"jupyter-gpucost: {text}", flush=True)


class LiveLine:
    """The guard's live line, redrawn no more often than a person can read it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._handle: _DisplayHandle | None = None
        self._shown_at = -1e18
        self._last_line = ""

    def show(self, line: Callable[[], str], *, force: bool = False, measuring: bool) -> None:
        """Show ``line()`` if it is time to (``force``: now); ``measuring``: the step rate
        is not known yet (nothing is printed outside IPython until it is)."""
        now = self._clock()
        ipython = in_ipython()
        every = DISPLAY_EVERY_S if ipython else PRINT_EVERY_S
        if not force and now - self._shown_at < every:
            return
        if not ipython and not force and measuring:
            return
        self._shown_at = now
        text = line()
        if text == self._last_line:
            return
        self._last_line = text
        if ipython:
            if self._handle is None:
                self._handle = _display(GuardHtml(text), display_id=True)
            else:
                self._handle.update(GuardHtml(text))
        else:
            print(f"jupyter-gpucost: {text}", flush=True)
