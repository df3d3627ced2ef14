"""``python -m jupyter_gpucost.hub check-profiles``: the service's config read by the app,
each profile's bill printed by :mod:`.profiles.check` (the command's table, which was
``hub/check_profiles.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TextIO

from .app import GpuCostHub
from .profiles import check
from .profiles.settings import ProfileSettings


def read_settings(
    config: str | None, values: Sequence[str], flags: Sequence[str] = ()
) -> ProfileSettings:
    """The profile settings of the service's config (``--config``) and its own
    ``--GpuCostHub.*`` flags, checked; ``values`` (command-line values files) win."""
    app = GpuCostHub()
    argv = []
    if config:
        argv += ["--config", config]
    argv += list(flags)
    app.initialize(argv)
    settings = app.profile_settings()
    if values:
        settings = replace(settings, profiles_from=tuple(values))
    return settings


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    return check.main(argv, read_settings, out, err)
