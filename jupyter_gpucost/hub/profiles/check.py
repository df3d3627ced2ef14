"""``python -m jupyter_gpucost.hub check-profiles``: how every profile will be billed.

Reads the service's config (``--config``, default ``gpucost_hub_config.py`` here; read by the
app, :mod:`..check_command`, and handed in as ``read_settings``; the service's own
``--GpuCostHub.name=value`` flags are applied over it) and the profile list it names
(``c.GpuCostHub.profiles_from``, or ``-f PATH``, several values files merged in Helm's
order), then prints one line per profile and option choice: slug, choice, GPU model ×
count (a fraction for a MIG slice, a shared GPU or a share of a node), price per hour and
where each figure came from; ``--json`` prints one object per line instead. A profile
that cannot be priced gets a hint where its display name or description names a GPU
(the check never bills from prose). Exits 2 naming what cannot be priced (the
service would refuse to start), 0 otherwise. Needs no Hub and no token: for admins
before a deploy, and in CI.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from ...core.currency import symbol
from ...core.money import budget
from ..allocation import PROFILES_SETTING, describe, parse_profiles, price
from ..model import HubConfigError, Rate
from . import settings as profiles_setup
from . import source as profile_source
from .cloud import Cloud
from .prose import prose_hints
from .settings import ProfileSettings
from .table import Line, ProfileTable


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_gpucost.hub check-profiles",
        description="Print how each KubeSpawner profile and option choice is billed; exit 2 "
        "naming any that cannot be priced. Takes the service's own flags "
        "(--GpuCostHub.profiles_from=..., --GpuCostHub.price_provider=...).",
    )
    parser.add_argument(
        "--config", help="the service's config file (default: gpucost_hub_config.py)"
    )
    parser.add_argument(
        "-f",
        "--values",
        "--profiles-from",
        dest="values",
        action="append",
        default=[],
        metavar="PATH",
        help="a Z2JH values file or a jupyterhub_config.py; several values files are merged "
        "in Helm's order, as `helm -f common.yaml -f prod.yaml` (beats "
        "c.GpuCostHub.profiles_from)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per profile and choice, for CI",
    )
    return parser


#: reads the service's config (its file, or None for the default) into the profile
#: settings, values files given on the command line (none: the config's) winning over
#: it, and the service's own ``--GpuCostHub.*`` flags applied last; :class:`HubConfigError`
#: or any other error when it cannot be used
ReadSettings = Callable[[str | None, Sequence[str], Sequence[str]], ProfileSettings]


def main(
    argv: list[str],
    read_settings: ReadSettings,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args, flags = _parser().parse_known_args(argv)
    strange = [f for f in flags if not f.startswith("--GpuCostHub.")]
    if strange:
        print(f"check-profiles: unrecognized arguments: {' '.join(strange)}", file=err)
        return 2
    try:
        settings = read_settings(args.config, args.values, flags)
    except HubConfigError as e:
        print(f"check-profiles: {e}", file=err)
        return 2
    except Exception as e:  # a config file that raises
        print(f"check-profiles: the configuration cannot be used: {e}", file=err)
        return 2
    if not settings.profiles_from:
        print(
            "check-profiles: c.GpuCostHub.profiles_from is not set (or give -f values.yaml)",
            file=err,
        )
        return 2
    try:
        return _check(settings, out, err, as_json=args.json)
    except HubConfigError as e:
        if args.json:
            print(json.dumps({"error": str(e)}), file=out)
        print(f"check-profiles: {e}", file=err)
        return 2


def _check(settings: ProfileSettings, out: TextIO, err: TextIO, *, as_json: bool = False) -> int:
    source = profile_source.read(settings.profiles_from)
    settings, cloud = profiles_setup.resolved(settings, source)
    sign = symbol(settings.prices.session_currency)
    prices = profiles_setup.derived_prices(settings.prices, settings.gpu_sharing)
    overrides = _overrides(settings)
    table = ProfileTable(source, prices, overrides)
    hints = prose_hints(table)
    if as_json:
        for line in table.lines:
            print(json.dumps(_json(line, table, settings, hints)), file=out)
        if table.unreadable:
            print(json.dumps({"profile": None, "error": table.unreadable}), file=out)
    else:
        _print_table(table, settings, sign, out, cloud)
    try:
        profiles_setup.build(settings, source)
    except HubConfigError as e:
        print(f"check-profiles: {e}", file=err)
        for problem in table.problems:
            print(f"cannot price: {problem}", file=err)
        for hint in hints.values():
            print(f"hint: {hint}", file=err)
        return 2
    return 0


def _print_table(
    table: ProfileTable, settings: ProfileSettings, sign: str, out: TextIO, cloud: Cloud
) -> None:
    print(f"profiles from {table.source.origin}", file=out)
    print(f"prices of {cloud.provider}: {cloud.why}", file=out)
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


def _json(
    line: Line, table: ProfileTable, settings: ProfileSettings, hints: Mapping[str, str]
) -> dict[str, object]:
    """One profile and choice for ``--json``: the GPUs (count as an exact fraction of a
    GPU, "1/7"), the price per hour as a decimal string, or the error."""
    found: dict[str, object] = {"profile": line.slug, "choice": line.choice}
    found["provider"] = settings.prices.provider
    currency = settings.prices.session_currency
    if line.rate is not None:
        a = line.rate.allocation
        found["gpus"] = {
            "model": a.model if a.count else None,
            "count": str(a.count * a.share),
            "detail": a.detail,
            "instance": a.instance,
            "instance_gpus": a.instance_gpus,
            "text": describe(a),
        }
        found["per_hour"] = f"{line.rate.usd_per_hour.normalize():f}"
        found["currency"] = currency
        found["source"] = line.rate.source
        if line.slug in table.overrides:
            found["source"] = f"{PROFILES_SETTING}[{line.slug!r}] override; {line.rate.source}"
    elif line.from_text:
        found["gpus"] = None
        found["per_hour"] = None
        found["currency"] = currency
        found["source"] = "the unlisted choice's text names the GPU: priced at run time"
    else:
        found["gpus"] = None
        found["per_hour"] = None
        found["currency"] = currency
        found["error"] = line.problem
        if line.slug in hints:
            found["hint"] = hints[line.slug]
    return found


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
