"""``python -m jupyter_gpucost.hub check-profiles``: how every profile will be billed.

Reads the service's config (``--config``, default ``gpucost_hub_config.py`` here; read by the
app, :mod:`..check_command`, and handed in as ``read_settings``) and the
profile list it names (``c.GpuCostHub.profiles_from``, or ``--profiles-from PATH``), then
prints one line per profile and option choice: slug, choice, GPU model × count, price
per hour and where each figure came from. Exits 2 naming what cannot be priced (the
service would refuse to start), 0 otherwise. Needs no Hub and no token: for admins
before a deploy, and in CI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import TextIO

from ...core.currency import symbol
from ...core.money import budget
from ..allocation import PROFILES_SETTING, describe, parse_profiles, price
from ..model import HubConfigError, Rate
from . import settings as profiles_setup
from . import source as profile_source
from .settings import ProfileSettings
from .table import Line, ProfileTable


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_gpucost.hub check-profiles",
        description="Print how each KubeSpawner profile and option choice is billed; exit 2 "
        "naming any that cannot be priced.",
    )
    parser.add_argument(
        "--config", "-f", help="the service's config file (default: gpucost_hub_config.py)"
    )
    parser.add_argument(
        "--profiles-from",
        help="a Z2JH values.yaml or a jupyterhub_config.py (beats c.GpuCostHub.profiles_from)",
    )
    return parser


#: reads the service's config (its file, or None for the default) into the profile
#: settings, a ``profiles_from`` given on the command line (or None) winning over it;
#: :class:`HubConfigError` or any other error when it cannot be used
ReadSettings = Callable[[str | None, str | None], ProfileSettings]


def main(
    argv: list[str],
    read_settings: ReadSettings,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    try:
        settings = read_settings(args.config, args.profiles_from)
    except HubConfigError as e:
        print(f"check-profiles: {e}", file=err)
        return 2
    except Exception as e:  # a config file that raises
        print(f"check-profiles: the configuration cannot be used: {e}", file=err)
        return 2
    if not settings.profiles_from:
        print(
            "check-profiles: c.GpuCostHub.profiles_from is not set (or give --profiles-from)",
            file=err,
        )
        return 2
    try:
        return _check(settings, out, err)
    except HubConfigError as e:
        print(f"check-profiles: {e}", file=err)
        return 2


def _check(settings: ProfileSettings, out: TextIO, err: TextIO) -> int:
    sign = symbol(settings.prices.session_currency)
    source = profile_source.read(settings.profiles_from)
    prices = profiles_setup.derived_prices(settings.prices)
    overrides = _overrides(settings)
    table = ProfileTable(source, prices, overrides)
    print(f"profiles from {source.origin}", file=out)
    rows = [("profile", "choice", "GPUs", "per hour", "from")]
    rows += [_row(line, table, sign) for line in table.lines]
    if table.unreadable:
        rows.append(("?", "-", "?", "?", table.unreadable))
    if callable(settings.profile_gpus):
        rows.append(
            (
                "*",
                "-",
                "?",
                "?",
                f"{PROFILES_SETTING} is a callable: it prices first; where it returns None, "
                "a line it cannot price bills the dearest rate",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(4)]
        print("  ".join([*cells, r[4]]), file=out)
    try:
        profiles_setup.build(settings)
    except HubConfigError as e:
        print(f"check-profiles: {e}", file=err)
        for problem in table.problems:
            print(f"cannot price: {problem}", file=err)
        return 2
    return 0


def _overrides(settings: ProfileSettings) -> Mapping[str, Rate]:
    profiles = parse_profiles(settings.profile_gpus)
    if not isinstance(profiles, Mapping):
        return {}
    return {
        name: price(a, settings.prices, setting=f"{PROFILES_SETTING}[{name!r}]")
        for name, a in profiles.items()
    }


def _row(line: Line, table: ProfileTable, sign: str) -> tuple[str, str, str, str, str]:
    if line.rate is not None:
        where = line.rate.source
        if line.slug in table.overrides:
            where = f"{PROFILES_SETTING}[{line.slug!r}] override; {where}"
        return (
            line.slug,
            line.choice,
            describe(line.rate.allocation),
            f"{budget(line.rate.usd_per_hour, sign)}/h",
            where,
        )
    if line.from_text:
        dearest = table.dearest
        fallback = f"{budget(dearest.usd_per_hour, sign)}/h" if dearest is not None else "unknown"
        return (
            line.slug,
            line.choice,
            "from the text",
            "at run time",
            "the unlisted choice's text names the GPU: a text naming a priced GPU exactly "
            f"is billed at its price, any other at the dearest rate ({fallback})",
        )
    return (line.slug, line.choice, "?", "CANNOT PRICE", line.problem)
