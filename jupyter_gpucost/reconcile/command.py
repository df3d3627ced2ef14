"""What the reconcile and FOCUS export commands share, the single server's and the hub's:
their exit codes and a parser that ends a wrong command line with code 2 (no ledger
imported here, so that the hub's commands can use it)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

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
