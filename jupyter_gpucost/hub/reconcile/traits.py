"""The service's settings for reading the cloud's FOCUS bill on a schedule
(``c.GpuCostHub.focus_source``, ``focus_interval_s``), and the frozen
:class:`FocusSettings` built from them at start. Off while ``focus_source`` is empty."""

from __future__ import annotations

from dataclasses import dataclass

from traitlets import Float, HasTraits, Unicode

from ..model import HubConfigError

SETTING = "c.GpuCostHub"
#: the shortest and longest interval between two reads of the bill
INTERVAL_RANGE_S = (300.0, 7 * 86_400.0)


@dataclass(frozen=True)
class FocusSettings:
    #: a FOCUS export: a file, a folder or a glob; local, ``s3://``, ``gs://``, ``az://``
    source: str
    interval_s: float

    @property
    def timeout_s(self) -> float:
        """The longest one read may take (then it is given up and logged)."""
        return min(self.interval_s, 3_600.0)


class FocusTraits(HasTraits):
    """``c.GpuCostHub`` settings for the reconciliation with the cloud's bill."""

    focus_source = Unicode(
        "",
        config=True,
        help="The cloud's FOCUS bill export the service reconciles on a schedule (a file, "
        "a folder or a glob; local, s3://, gs://, az://); empty: not read.",
    )
    focus_interval_s = Float(
        86_400.0,
        config=True,
        help="How often the FOCUS bill is read (seconds, 300 to 604800).",
    )

    def focus_settings(self) -> FocusSettings | None:
        """The checked settings (``None``: off); :class:`HubConfigError` names a bad one."""
        if not self.focus_source.strip():
            return None
        low, high = INTERVAL_RANGE_S
        interval = float(self.focus_interval_s)
        if not low <= interval <= high:
            raise HubConfigError(
                f"{SETTING}.focus_interval_s = {interval:g} is not valid: use seconds from "
                f"{low:g} to {high:g}"
            )
        return FocusSettings(self.focus_source.strip(), interval)
