"""List the price catalog's rows whose price is older than a given age.

    python scripts/price_age.py                      # rows seen more than 180 days ago
    python scripts/price_age.py --max-age-days 90    # a shorter cycle (spot prices drift)
    python scripts/price_age.py --catalog my.toml --today 2027-03-01

Each row's age is from its ``as_of`` (the date its source saw the price) to today; a row
with no date counts as too old. Prints one line per row (provider, instance or model,
market, date, age, confidence), oldest first, and exits 1 when there is one, 0 when every
row is younger: a maintainer's check before a release, or a CI job on a schedule.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from jupyter_gpucost.core.catalog import CatalogError, load_catalog
from jupyter_gpucost.core.instance_prices import load_instance_rows

DEFAULT_MAX_AGE_DAYS = 180


@dataclass(frozen=True)
class Aged:
    kind: str
    provider: str
    name: str
    market: str
    as_of: date | None
    confidence: str

    def age_days(self, today: date) -> int | None:
        return None if self.as_of is None else (today - self.as_of).days

    def line(self, today: date) -> str:
        days = self.age_days(today)
        when = "undated" if self.as_of is None else f"{self.as_of} ({days} days)"
        return (
            f"{self.kind:8} {self.provider:8} {self.name:32} {self.market:9} {when:24} "
            f"{self.confidence}"
        )


def _date(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def rows(path: str | Path | None = None) -> list[Aged]:
    """Every row of the catalog (the shipped one, or the file at ``path``) with its date."""
    found = [
        Aged("price", r.provider, r.instance or r.model, r.market, _date(r.as_of), r.confidence)
        for r in load_catalog(path).rows
    ]
    found += [
        Aged("instance", r.provider, r.instance, r.market, _date(r.as_of), r.confidence)
        for r in load_instance_rows(path)
    ]
    return found


def older_than(found: Sequence[Aged], today: date, max_age_days: int) -> list[Aged]:
    """The rows older than ``max_age_days`` (undated ones included), oldest first."""
    old = [r for r in found if (r.age_days(today) or 0) > max_age_days or r.as_of is None]
    return sorted(old, key=lambda r: (r.as_of or date.min, r.provider, r.name, r.market))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", help="a catalog file (default: the shipped one)")
    parser.add_argument("--max-age-days", type=int, default=DEFAULT_MAX_AGE_DAYS)
    parser.add_argument("--today", type=date.fromisoformat, help="YYYY-MM-DD (default: today)")
    args = parser.parse_args(argv)
    if args.max_age_days < 0:
        parser.error("--max-age-days must be 0 or more")
    today: date = args.today or datetime.now(UTC).date()
    try:
        old = older_than(rows(args.catalog), today, args.max_age_days)
    except CatalogError as e:
        print(f"price_age: {e}", file=sys.stderr)
        return 2
    for row in old:
        print(row.line(today))
    what = f"{len(old)} row(s) older than {args.max_age_days} days on {today}"
    print(what if old else f"no row older than {args.max_age_days} days on {today}")
    return 1 if old else 0


if __name__ == "__main__":
    sys.exit(main())
