"""What the reconcile and FOCUS export commands share, the single server's and the hub's:
their exit codes, a parser that ends a wrong command line with code 2, and the bill's
source, ``--since``, ``--json`` and fsspec's storage options of both reconcile commands (no
ledger imported here, so that the hub's commands can use it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import date
from typing import NoReturn

from ..core.i18n import _

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 4
EXIT_EMPTY = 5
EXIT_LEDGER = 6


class Parser(argparse.ArgumentParser):
    """A parser that ends a wrong command line with exit code 2 and says why."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def bill_parser(prog: str, description: str) -> Parser:
    """A parser of the bill's source and the options every reconcile command has."""
    p = Parser(prog=prog, description=description)
    p.add_argument(
        "source", help=_("a FOCUS export: a file, a folder or a glob; local, s3://, gs://, az://")
    )
    p.add_argument("--since", type=date.fromisoformat, help=_("only days from DATE (YYYY-MM-DD)"))
    p.add_argument("--json", action="store_true", help=_("print one JSON object"))
    p.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=_("an fsspec storage option for SOURCE (repeatable)"),
    )
    return p


def storage_options(p: argparse.ArgumentParser, items: Sequence[object]) -> dict[str, str]:
    """``--storage-option KEY=VALUE`` as fsspec's options (a wrong one ends the command)."""
    options: dict[str, str] = {}
    for item in items:
        key, eq, value = str(item).partition("=")
        if not eq:
            p.error(_("--storage-option takes KEY=VALUE, not {item!r}").format(item=item))
        options[key] = value
    return options
