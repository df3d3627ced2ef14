"""``python -m jupyter_gpucost.hub check-profiles``: the service's config read by the app,
each profile's bill printed by :mod:`.profiles.check` (the command's table, which was
``hub/check_profiles.py``)."""

from __future__ import annotations

from typing import TextIO

from .app import GpuCostHub
from .profiles import check
from .profiles.settings import ProfileSettings


def read_settings(config: str | None, profiles_from: str | None) -> ProfileSettings:
    """The profile settings of the service's config (``--config``), checked."""
    app = GpuCostHub()
    argv = []
    if config:
        argv += ["--config", config]
    if profiles_from:
        argv.append(f"--GpuCostHub.profiles_from={profiles_from}")
    app.initialize(argv)
    return app.profile_settings()


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    return check.main(argv, read_settings, out, err)
