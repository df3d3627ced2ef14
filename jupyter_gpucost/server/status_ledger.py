"""The status document's ``ledger`` object and the ledger's warnings: the ledger as the
status describes it (:class:`LedgerFacts`), and the sentence a route that needs the ledger
answers while it cannot be reached."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from ..core.i18n import _, ngettext
from ..core.money import notice
from ..core.wire import LedgerState, StatusWarning
from .ledger import Reset


@dataclass(frozen=True)
class LedgerFacts:
    """The ledger as the status document describes it."""

    enabled: bool
    #: why there is no ledger (``None``: none was configured, or there is one)
    error: str | None = None
    #: its SQLAlchemy URL, password hidden
    url: str | None = None
    flush_interval_s: float = 0.0
    #: "today" and "this month" start in this zone
    timezone: str = ""
    #: a damaged ledger moved aside before a fresh one was started: where, what it held
    reset: Reset | None = None
    #: since when the ledger cannot be reached (``None``: it can), and why
    down_since: datetime | None = None
    down_error: str | None = None
    #: seconds of this session and the cost not written to the ledger yet
    unwritten_s: float = 0.0
    unwritten_micro: int = 0
    #: whether what is not written is in the local journal (a remote ledger)
    journaled: bool = False
    #: the ledger's time zone (``None``: the server's)
    tz: tzinfo | None = None

    @property
    def reset_from(self) -> str | None:
        return None if self.reset is None else self.reset.path


def ledger_unreachable(down_since: datetime | None, tz: tzinfo | None) -> str:
    """The sentence a route that needs the ledger answers while it cannot be reached."""
    if down_since is None:
        return _(
            "The ledger cannot be reached just now; try again in a moment. Nothing of this "
            "session is lost: it is written when the ledger is back."
        )
    return _(
        "The ledger is unreachable since {time}; try again when it is back. Nothing of this "
        "session is lost: it is written when the ledger is back."
    ).format(time=_clock(down_since, tz))


def _clock(when: datetime, tz: tzinfo | None) -> str:
    local = when.astimezone(tz) if tz is not None else when.astimezone()
    return f"{local:%H:%M} {local.tzname() or ''}".strip()


def ledger_json(ledger: LedgerFacts) -> LedgerState:
    if not ledger.enabled:
        return {"enabled": False, "reason": ledger.error}
    reset = ledger.reset
    return {
        "enabled": True,
        "url": ledger.url,
        "flush_interval_s": ledger.flush_interval_s,
        "timezone": ledger.timezone,
        "reset_from": ledger.reset_from,
        "reset": None
        if reset is None
        else {
            "file": reset.path,
            "reason": reset.reason,
            "sessions": reset.sessions,
            "cost_micro": reset.cost_micro,
            "cost_micro_usd": reset.cost_micro,  # deprecated twin
        },
        "reachable": ledger.down_since is None,
        "unreachable_since": None
        if ledger.down_since is None
        else ledger.down_since.isoformat(timespec="seconds"),
        "error": ledger.down_error,
        "unwritten_s": round(ledger.unwritten_s, 1),
        "unwritten_micro": ledger.unwritten_micro,
        "unwritten_micro_usd": ledger.unwritten_micro,  # deprecated twin
        "journaled": ledger.journaled,
    }


def ledger_warnings(ledger: LedgerFacts, symbol: str = "$") -> list[StatusWarning]:
    if not ledger.enabled and ledger.error is not None:
        return [
            {
                "code": "ledger-unavailable",
                "message": _(
                    "No ledger ({error}): today's and this month's totals are not kept."
                ).format(error=ledger.error),
            }
        ]
    warnings: list[StatusWarning] = []
    reset = ledger.reset
    if ledger.enabled and reset is not None:
        if reset.sessions is None or reset.cost_micro is None:
            held = _("what it held could not be read")
        else:
            held = ngettext(
                "it held {count} session costing {cost}",
                "it held {count} sessions costing {cost}",
                reset.sessions,
            ).format(count=reset.sessions, cost=notice(reset.cost_micro, symbol))
        warnings.append(
            {
                "code": "ledger-reset",
                "message": _(
                    "The ledger was damaged and was moved to {file} ({held}); a fresh one was "
                    "started, so earlier sessions are not in today's and this month's totals."
                ).format(file=reset.path, held=held),
            }
        )
    if ledger.enabled and ledger.down_since is not None:
        waiting = round(ledger.unwritten_s)
        warnings.append(
            {
                "code": "ledger-unreachable",
                "message": ngettext(
                    "The ledger is unreachable since {time}; nothing lost yet; {count} s "
                    "waiting to be written.",
                    "The ledger is unreachable since {time}; nothing lost yet; {count} s "
                    "waiting to be written.",
                    waiting,
                ).format(time=_clock(ledger.down_since, ledger.tz), count=waiting),
            }
        )
    return warnings
