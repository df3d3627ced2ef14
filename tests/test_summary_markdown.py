"""The run's summary cell renders everywhere: amounts and labels escaped for Markdown and
for the TeX JupyterLab and nbconvert typeset between dollar signs, checked with a CommonMark
renderer that reads ``$…$`` as math (as GitHub and JupyterLab do), with nbconvert's HTML and
with nbconvert's Markdown (what GitHub's renderer is based on); a cell's time follows the
badge's rule."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from jupyter_gpucost.core.saved_cost import NotebookSummary
from jupyter_gpucost.core.wording import cell_seconds
from jupyter_gpucost.headless.summary import markdown_text, summary_markdown

BIN = Path(sys.executable).parent
#: labels a price catalog or an admin's override may hold
HOSTILE = "A100 $5/h *fast* [link](http://x) <b>bold</b> `code` _x_ | ~y~ & \\$"
#: the summary's list, as a reader sees it (sorted by name)
ITEMS = [f"{HOSTILE}: $0.0023", "NVIDIA A100-SXM4-80GB: $0.0016"]


def renderer() -> MarkdownIt:
    """CommonMark with GitHub's tables and strikethrough, and ``$…$`` read as math."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return md.use(dollarmath_plugin)


class _Items(HTMLParser):
    """The text of each ``<li>`` and whether any math was made."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self.depth = 0
        self.math = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "li":
            self.depth += 1
            self.text = []
        classes = dict(attrs).get("class") or ""
        if "math" in classes.split():
            self.math = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "li":
            self.depth -= 1
            self.items.append("".join(self.text).strip())

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.text.append(data)


def items_of(html: str) -> _Items:
    parser = _Items()
    parser.feed(html)
    return parser


def summary(**overrides: object) -> NotebookSummary:
    s = NotebookSummary(
        cells=6,
        total_micro_usd=1600 + 2300,
        by_gpu_micro_usd={"NVIDIA A100-SXM4-80GB": 1600, HOSTILE: 2300},
        price_sources=["catalog 2026-11 ($ on-demand) *list*"],
        simulated=True,
        simulated_by="demo $trace",
    )
    for key, value in overrides.items():
        setattr(s, key, value)
    return s


def test_the_amounts_and_the_list_survive_a_renderer_that_reads_dollars_as_math() -> None:
    text = summary_markdown(summary())
    html = renderer().render(text)
    found = items_of(html)
    assert not found.math, html
    assert found.items == ITEMS
    assert "this run cost $0.0039 over 6 priced cells." in html
    assert "<b>" not in html
    assert "<a " not in html
    assert "<code>" not in html
    # every dollar sign in the source is escaped
    assert text.count("$") == text.count("\\$")


@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=60))
def test_any_label_reads_back_as_itself(label: str) -> None:
    html = renderer().render(f"- {markdown_text(label)}: \\$1")
    found = items_of(html)
    assert not found.math
    expected = " ".join(label.split())
    if expected:
        assert found.items[-1] == f"{expected}: $1"


def test_a_trivial_run_is_not_zero_and_a_trivial_cell_is_not_zero_seconds() -> None:
    text = summary_markdown(summary(total_micro_usd=3, by_gpu_micro_usd={"A10G": 3}))
    assert "< \\$0.0001" in text
    assert cell_seconds(0.0012) == "< 0.01 s"
    assert cell_seconds(0.0) == "0.00 s"


def test_the_browser_duration_rule_cases_are_the_kernels() -> None:
    path = Path(__file__).parent.parent / "labextension/src/__tests__/duration-rule.json"
    cases = json.loads(path.read_text())["cases"]
    assert len(cases) > 20
    for case in cases:
        assert cell_seconds(float(case["seconds"])) == case["shown"]


def notebook_with_summary(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(summary_markdown(summary()))]
    path = tmp_path / "summary.ipynb"
    nbformat.write(nb, path)
    return path


def convert(tmp_path: Path, to: str, suffix: str) -> str:
    """The summary cell's notebook, as ``jupyter nbconvert --to TO`` writes it."""
    path = notebook_with_summary(tmp_path)
    command = [BIN / "jupyter", "nbconvert", "--to", to, str(path)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return path.with_suffix(suffix).read_text()


def test_nbconvert_html_shows_the_list_and_amounts(tmp_path: Path) -> None:
    html = convert(tmp_path, "html", ".html")
    body = html[html.index('<div class="jp-Cell') :]
    found = items_of(body)
    assert found.items == ITEMS
    # nbconvert's Markdown writes "\\$" as "$"; MathJax 2 (nbconvert's) leaves the cell alone
    assert '<div class="tex2jax_ignore mathjax_ignore">' in body


def test_nbconvert_markdown_renders_on_a_github_style_renderer(tmp_path: Path) -> None:
    markdown = convert(tmp_path, "markdown", ".md")
    html = renderer().render(markdown)
    found = items_of(html)
    assert not found.math
    assert found.items == ITEMS
