"""The notebook stays clean: the kernel adds no output to a priced cell (its record travels
in the execute reply), plain runners that know nothing of us leave the notebook as it would
be without the extension, our runners write ``metadata.gpucost``, and the documented options
of nbstripout, jupytext and nbdime keep two identical runs from differing — each checked
with the real tool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from test_headless import assert_sums_exactly, notebook, saved_costs, simulated, write

from jupyter_gpucost.core.saved_cost import METADATA_KEY, MIMETYPE
from jupyter_gpucost.headless import execute
from jupyter_gpucost.headless.collect import SUMMARY_TAG

__all__ = ["simulated"]  # the fixture, shared with test_headless

BIN = Path(sys.executable).parent
#: a notebook that prices its own cells, as the issue's users write it
SOURCES = (
    "%load_ext jupyter_gpucost\n%gpucost auto on",
    "print('hello')",
    "md:a note",
    "x = sum(range(10**5))\nx",
    "%%gpucost\ny = x + 1",
)
#: what nbstripout is told to strip besides its defaults (docs/headless.md)
NBSTRIPOUT_KEYS = "metadata.gpucost cell.metadata.gpucost"
#: papermill's own timings, for notebooks run through papermill (docs/headless.md)
PAPERMILL_KEYS = "metadata.papermill cell.metadata.papermill"


def ours(nb: Any) -> list[str]:
    """Everything of ours in a notebook: metadata keys and outputs that mention us."""
    found = []
    if METADATA_KEY in nb.metadata:
        found.append("metadata.gpucost")
    for i, cell in enumerate(nb.cells):
        if METADATA_KEY in cell.get("metadata", {}):
            found.append(f"cells[{i}].metadata.gpucost")
        if i == 0:
            continue  # the %gpucost auto on cell: the user's command, answered
        for output in cell.get("outputs", []):
            text = json.dumps(output)
            if MIMETYPE in text or "gpucost:" in text:
                found.append(f"cells[{i}].outputs: {text[:80]}")
    return found


def assert_cells_show_what_their_code_shows(nb: Any) -> None:
    """Each priced cell shows exactly what its code shows, nothing else, and a %%gpucost
    cell its report once."""
    printed, value = nb.cells[1].outputs, nb.cells[3].outputs
    assert [o["output_type"] for o in printed] == ["stream"]
    assert printed[0]["text"] == "hello\n"
    assert [o["output_type"] for o in value] == ["execute_result"]
    assert len(nb.cells[4].outputs) == 1


def run(*args: object, env: dict[str, str], cwd: Path | None = None) -> None:
    subprocess.run(
        [str(a) for a in args], check=True, env=env, cwd=cwd, capture_output=True, timeout=180
    )


def test_plain_papermill_leaves_no_output_of_ours(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    path = write(tmp_path, notebook(*SOURCES))
    run(BIN / "papermill", path, tmp_path / "out.ipynb", env=simulated)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert ours(out) == []
    assert_cells_show_what_their_code_shows(out)


def test_plain_nbconvert_execute_leaves_no_output_of_ours(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    path = write(tmp_path, notebook(*SOURCES))
    nbconvert = (BIN / "jupyter", "nbconvert", "--to", "notebook", "--execute")
    run(*nbconvert, "--output", "out.ipynb", path, env=simulated)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert ours(out) == []
    assert_cells_show_what_their_code_shows(out)


def test_our_runners_write_the_metadata_and_no_output(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    path = write(tmp_path, notebook(*SOURCES))
    gpucost_run = (BIN / "jupyter", "gpucost", "run", path, "--telemetry", "simulated")
    run(*gpucost_run, "--ledger", "none", env=simulated)
    out = nbformat.read(tmp_path / "in.gpucost.ipynb", as_version=4)
    # every code cell priced (the runner switches auto mode on before the first)
    assert sorted(saved_costs(out)) == [0, 1, 3, 4]
    assert_sums_exactly(out)
    assert_cells_show_what_their_code_shows(out)
    # the summary is the point of this runner: on by default
    assert SUMMARY_TAG in out.cells[-1].metadata["tags"]


def test_the_summary_cell_is_off_by_default_for_nbclient_and_papermill(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    nb = notebook("x = 1")
    execute(nb, kernel_name="python3", timeout=60)
    assert [c.cell_type for c in nb.cells] == ["code"]
    assert nb.metadata[METADATA_KEY]["cells"] == 1
    path = write(tmp_path, notebook("x = 1"))
    run(BIN / "papermill", "--engine", "gpucost", path, tmp_path / "out.ipynb", env=simulated)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [c.cell_type for c in out.cells] == ["code"]
    assert out.metadata[METADATA_KEY]["cells"] == 1


def test_an_old_notebook_with_hidden_outputs_comes_back_clean(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    genuine = notebook("x = 1")
    execute(genuine, kernel_name="python3", timeout=60)
    record = genuine.cells[0].metadata[METADATA_KEY]
    old = notebook("print('a')", "y = 2")
    for cell in old.cells:  # as an earlier version saved it
        cell.outputs = [
            nbformat.v4.new_output(
                "display_data",
                data={MIMETYPE: record, "text/plain": "gpucost: $0.00 · 0.00 s at $6.86/h"},
                metadata={MIMETYPE: {"carrier": True}},
            )
        ]
    old.cells[1].metadata["tags"] = ["skip-execution"]  # not run again: cleaned all the same
    path = write(tmp_path, old)
    run(BIN / "papermill", "--engine", "gpucost", path, tmp_path / "out.ipynb", env=simulated)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert [o["output_type"] for o in out.cells[0].outputs] == ["stream"]
    assert out.cells[1].outputs == []
    assert MIMETYPE not in json.dumps(nbformat.writes(out))


# -- two identical runs -------------------------------------------------------------------


def two_runs(simulated: dict[str, str], tmp_path: Path, sources: tuple[str, ...]) -> list[Path]:
    """The same notebook run twice with papermill's gpucost engine (its summary cell off,
    the default)."""
    path = write(tmp_path, notebook(*sources))
    outs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}.ipynb"
        run(BIN / "papermill", "--engine", "gpucost", path, out, env=simulated)
        outs.append(out)
    return outs


def strip(path: Path, *extra: str) -> str:
    args = [str(BIN / "nbstripout"), "--textconv"]
    if extra:
        args += ["--extra-keys", " ".join(extra)]
    done = subprocess.run([*args, str(path)], check=True, capture_output=True, text=True)
    return done.stdout


def test_two_identical_runs_stripped_with_the_documented_options_do_not_differ(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    first, second = two_runs(simulated, tmp_path, ("import time\ntime.sleep(0.05)", "x = 1"))
    # the costs are there, and differ (the cells took different times)
    a = nbformat.read(first, as_version=4)
    b = nbformat.read(second, as_version=4)
    assert a.cells[0].metadata[METADATA_KEY] != b.cells[0].metadata[METADATA_KEY]
    # nbstripout with only papermill's keys leaves our records: the runs differ
    assert strip(first, PAPERMILL_KEYS) != strip(second, PAPERMILL_KEYS)
    # with the documented keys nothing is left to differ
    assert strip(first, NBSTRIPOUT_KEYS, PAPERMILL_KEYS) == strip(
        second, NBSTRIPOUT_KEYS, PAPERMILL_KEYS
    )
    assert "gpucost" not in strip(first, NBSTRIPOUT_KEYS, PAPERMILL_KEYS)


def test_the_jupytext_pair_does_not_change_between_runs(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    first, second = two_runs(simulated, tmp_path, ("import time\ntime.sleep(0.05)", "x = 1"))

    def paired(path: Path) -> str:
        run(BIN / "jupytext", "--to", "py:percent", path, env=dict(os.environ), cwd=path.parent)
        return path.with_suffix(".py").read_text()

    # without the filter: the records are written onto each cell's "# %%" line
    assert paired(first) != paired(second)
    # the documented filter (docs/headless.md), in the folder's jupytext.toml
    (tmp_path / "jupytext.toml").write_text(
        'notebook_metadata_filter = "-gpucost"\ncell_metadata_filter = "-gpucost,-papermill"\n'
    )
    one, two = paired(first), paired(second)
    assert one == two
    assert "cost_micro_usd" not in one
    assert "time.sleep(0.05)" in one


def test_nbdime_ignores_the_records_with_the_documented_config(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    first, second = two_runs(simulated, tmp_path, ("x = 1",))
    config = tmp_path / "config"
    config.mkdir()

    def nbdiff() -> str:
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config)}
        done = subprocess.run(
            [str(BIN / "nbdiff"), str(first), str(second)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        return done.stdout

    assert "gpucost" in nbdiff()
    # the documented example (docs/headless.md)
    (config / "nbdime_config.json").write_text(
        json.dumps(
            {
                "Diff": {
                    "Ignore": {
                        "/metadata": ["gpucost", "papermill"],
                        "/cells/*/metadata": ["gpucost", "papermill", "execution"],
                    }
                }
            }
        )
    )
    assert "gpucost" not in nbdiff()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_nbstripout_as_a_git_filter_keeps_a_rerun_out_of_git_status(
    simulated: dict[str, str], tmp_path: Path
) -> None:
    """The way people use nbstripout: installed as the repository's filter, with the
    documented keys in git's config; a second identical run shows no change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    nb_path = write(repo, notebook("x = 1"), "nb.ipynb")

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        )
        return done.stdout

    def rerun() -> None:
        run(BIN / "papermill", "--engine", "gpucost", nb_path, nb_path, env=simulated)

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    run(BIN / "nbstripout", "--install", env=dict(os.environ), cwd=repo)
    git("config", "filter.nbstripout.extrakeys", f"{NBSTRIPOUT_KEYS} {PAPERMILL_KEYS}")
    rerun()
    git("add", "nb.ipynb")
    git("commit", "-q", "-m", "first run")
    rerun()
    assert METADATA_KEY in nbformat.read(nb_path, as_version=4).metadata
    # git's status compares a file's size before its content, so a rewritten notebook may
    # be listed until git reads it through the filter; what a user would commit is what
    # counts: no difference, and nothing staged once it is added
    assert git("diff") == ""
    git("add", "nb.ipynb")
    assert git("status", "--porcelain") == ""
