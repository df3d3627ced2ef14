"""Every form of ``%gpucost`` and ``%%gpucost``, with what it does: the one list that
``%gpucost --help``, ``%gpucost SUBCOMMAND --help``, ``%gpucost?`` and the usage lines of
the refusals are written from.

A bare subcommand shows its state and never acts: ``%gpucost auto`` says whether every cell
is priced, ``%gpucost budget`` what the budget is, ``%gpucost stop-when-done`` whether a stop
is armed, ``%gpucost on-interrupt`` the code kept.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import NoReturn

from IPython.core.error import UsageError

from ...core.i18n import N_, _


@dataclass(frozen=True)
class Form:
    """One way of writing the magic: ``usage`` is typed as it stands (never translated),
    ``what`` says what it does (translated when shown)."""

    subcommand: str
    usage: str
    what: str


FORMS: tuple[Form, ...] = (
    Form(
        "%%gpucost",
        "%%gpucost [--ops] [--top N] [-o NAME | --output NAME]",
        N_(
            "on a cell's first line: run the cell and show what it cost (GPU time, peak "
            "memory, energy); --ops adds the costliest operators, -o keeps the report in NAME"
        ),
    ),
    Form("", "%gpucost", N_("what this session has cost, this kernel's cells and the prices")),
    Form("", "%gpucost --help", N_("every form of %gpucost and %%gpucost (this list)")),
    Form("auto", "%gpucost auto", N_("whether every cell is priced")),
    Form("auto", "%gpucost auto on|off", N_("price every cell from now on, or stop")),
    Form("budget", "%gpucost budget", N_("the budget in force and what is spent of it")),
    Form(
        "budget",
        "%gpucost budget AMOUNT|off [--scope session|day|month]",
        N_("set your own budget (in the session's currency), or remove it"),
    ),
    Form(
        "check",
        "%gpucost check",
        N_(
            "whether this kernel's PyTorch matches the GPUs and the driver (CUDA, cuDNN, "
            "compute capability)"
        ),
    ),
    Form(
        "stop-when-done",
        "%gpucost stop-when-done",
        N_("whether a stop is armed for when this cell ends"),
    ),
    Form(
        "stop-when-done",
        "%gpucost stop-when-done on [--action stop-instance|stop-server|shutdown|interrupt]",
        N_(
            "when this cell ends (finished or failed): save, export, then stop the machine "
            "(or the given action), after a countdown you can cancel"
        ),
    ),
    Form("stop-when-done", "%gpucost stop-when-done off", N_("take that stop back")),
    Form(
        "on-interrupt", "%gpucost on-interrupt", N_("the code kept to run at a spot interruption")
    ),
    Form(
        "on-interrupt",
        "%gpucost on-interrupt CODE|off",
        N_("keep CODE to run when the cloud takes a spot machine back, or forget it"),
    ),
    Form(
        "fit",
        "%gpucost fit SIZE [--dtype DTYPE] [--finetune] [--lora] [--batch N] [--seq N]",
        N_(
            "whether a model of SIZE parameters fits in this machine's GPU memory (weights, "
            "training state, activations)"
        ),
    ),
)

SUBCOMMANDS = tuple(dict.fromkeys(f.subcommand for f in FORMS if f.subcommand))
HELP_WORDS = ("--help", "-h", "help")


def usage_of(subcommand: str | None = None) -> str:
    """The usage line(s): of one subcommand, or of every line form (``None``)."""
    if subcommand is None:
        forms = [f for f in FORMS if f.subcommand != "%%gpucost"]
    else:
        forms = [f for f in FORMS if f.subcommand == subcommand]
    return " | ".join(f.usage for f in forms)


def help_text(subcommand: str | None = None, *, translate: bool = True) -> str:
    """Every form with what it does (of one subcommand, or all), one per line."""
    forms = [f for f in FORMS if subcommand is None or f.subcommand == subcommand]
    say = _ if translate else str
    return "\n".join(f"{f.usage}\n    {say(f.what)}" for f in forms)


def docstring() -> str:
    """What ``%gpucost?`` shows (IPython reads the magic's docstring, in English)."""
    return (
        "What this notebook session costs on its GPUs, from the kernel.\n\n"
        + help_text(translate=False)
        + "\n\nA bare subcommand shows its state and never acts. docs/magic.md has more."
    )


class MagicParser(argparse.ArgumentParser):
    """The arguments of one form of the magic: a mistake is IPython's ``UsageError``, with
    the form's usage line (no ``--help`` of argparse's: the magic's own help answers it)."""

    def __init__(self, prog: str, usage_line: str) -> None:
        super().__init__(prog=prog, add_help=False)
        self.usage_line = usage_line

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\nusage: {self.usage_line}")
