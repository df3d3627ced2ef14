"""``%gpucost --help``, ``%gpucost SUBCOMMAND --help`` and ``%gpucost?`` list every form, and
a bare subcommand shows its state without acting; in a real kernel."""

from __future__ import annotations

import subprocess
import sys

from kernel_notebook import run_notebook, text

from jupyter_gpucost.kernel.commands.usage import FORMS, SUBCOMMANDS


def test_help_lists_every_form_and_a_subcommand_s_help_its_own() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost --help",
            "%gpucost help",
            "%gpucost stop-when-done --help",
            "%gpucost budget -h",
            # what %gpucost? shows: IPython's inspector reads the magic's docstring
            "print(get_ipython().find_line_magic('gpucost').__doc__)",
            "%gpucost nonsense\n# raises",
        ]
    )
    c = nb.cells
    everything = text(c[1])
    for form in FORMS:
        assert form.usage in everything, form.usage
    assert text(c[2]) == everything
    # one subcommand's forms, and only its own
    stop = text(c[3])
    own = [f.usage for f in FORMS if f.subcommand == "stop-when-done"]
    assert len(own) == 3
    for usage in own:
        assert usage in stop
    assert "%gpucost budget" not in stop
    assert "%gpucost budget AMOUNT|off" in text(c[4])
    assert "stop-when-done" not in text(c[4])
    docstring = text(c[5])
    for form in FORMS:
        assert form.usage in docstring, form.usage
    assert "never acts" in docstring
    # a refusal's usage names every line form too
    refused = text(c[6])
    assert "unknown subcommand 'nonsense'" in refused
    for sub in SUBCOMMANDS:
        if sub != "%%gpucost":
            assert f"%gpucost {sub}" in refused, sub


def test_a_bare_subcommand_shows_its_state_and_changes_nothing() -> None:
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost auto",
            "pricer = getattr(get_ipython(), 'gpucost_auto', None)\n"
            "print('auto on' if pricer is not None and pricer.enabled else 'auto off')",
            "%gpucost stop-when-done",
            "print(getattr(get_ipython(), 'gpucost_stop_when_done', None))",
            "%gpucost on-interrupt",
            "%gpucost budget",
            # the explicit forms still act (here they are refused: no server for this kernel)
            "%gpucost stop-when-done on\n# raises",
        ]
    )
    c = nb.cells
    assert "cells are not priced one by one (%gpucost auto on starts)" in text(c[1])
    assert text(c[2]).strip() == "auto off"
    assert text(c[3]).strip() == "gpucost: nothing will be stopped when this cell ends."
    assert text(c[4]).strip() == "None"
    assert "no code is kept to run at an interruption" in text(c[5])
    assert "budgets are kept by the jupyter-gpucost server extension" in text(c[6])
    assert "UsageError" in text(c[7])
    assert "stopping is done by the jupyter-gpucost server extension" in text(c[7])


def test_the_papermill_engine_imports_before_papermill() -> None:
    # papermill loads its engines' entry points while it is being imported: importing our
    # engine first must not find it half-made
    code = (
        "import jupyter_gpucost.headless.papermill_engine as ours\n"
        "from papermill.engines import papermill_engines\n"
        "engine = papermill_engines.get_engine('gpucost')\n"
        "assert engine.execute_managed_notebook.__func__ is "
        "ours.PricingEngine.execute_managed_notebook.__func__\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
