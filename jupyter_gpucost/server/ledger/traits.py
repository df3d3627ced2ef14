"""The ledger's settings of ``c.GpuCost``: where it is, how often it is written, and the
time zone of its calendar. The app reads them once (:mod:`..settings`, :mod:`..app`);
``ledger_flush_interval_s``'s bounds are the app's ``RANGES`` (:mod:`..traits`).
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from traitlets import Float, HasTraits, TraitError, Unicode, validate


class LedgerTraits(HasTraits):
    ledger_url = Unicode(
        "",
        config=True,
        help="SQLAlchemy URL of the ledger that keeps every session's cost (e.g. "
        "'postgresql+psycopg://user@host/gpucost' for one ledger per hub). Empty: SQLite at "
        "<Jupyter data dir>/gpucost/ledger.sqlite. 'none': no ledger (session totals only).",
    )
    ledger_flush_interval_s = Float(
        5.0,
        config=True,
        help="Seconds between two writes to the ledger (0.5 to 300). A server killed hard "
        "loses at most this much of its cost from the ledger.",
    )
    ledger_timezone = Unicode(
        "",
        config=True,
        help="IANA time zone in which 'today' and 'this month' start (e.g. 'Europe/Paris'). "
        "Empty: the server's local time.",
    )

    @validate("ledger_timezone")
    def _check_timezone(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"]).strip()
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise TraitError(
                    f"c.GpuCost.ledger_timezone = {value!r} is not valid: use an IANA time "
                    "zone such as 'UTC' or 'Europe/Paris', or leave it empty."
                ) from None
        return value
