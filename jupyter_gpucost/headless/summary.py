"""The run's summary cell: the notebook's cost in a few lines of Markdown, shown where
metadata is not (GitHub, nbconvert's HTML, a front end without the extension).

Everything written into it is escaped for Markdown and for the TeX that JupyterLab, Notebook
7, nbconvert's HTML and GitHub typeset between dollar signs: every ``$`` is written ``\\$``
(else ``$0.0016 … $0.0016`` reads as one formula and the list is lost), and a GPU's or a
price's label can start no list, link, emphasis or HTML tag. The Markdown parsers of
JupyterLab and GitHub find math in the source, where ``\\$`` is a dollar sign; MathJax then
typesets the rendered page, where it is a plain ``$`` again: the cell is wrapped in a
``<div>`` of MathJax's ignore classes (``tex2jax_ignore`` for MathJax 2, nbconvert's;
``mathjax_ignore`` for MathJax 3, JupyterLab's), the way the guard's lines are. Amounts
follow the money rule of every view (:func:`~jupyter_gpucost.core.money.status_bar`), as
the badge shows them.
"""

from __future__ import annotations

import re

from ..core.i18n import _
from ..core.money import status_bar, to_units
from ..core.saved_cost import NotebookSummary

#: the classes MathJax 2 and 3 leave untypeset
IGNORE_MATH = '<div class="tex2jax_ignore mathjax_ignore">'
#: what Markdown (CommonMark, GitHub's) or TeX can read as syntax anywhere in a line
_SPECIAL = re.compile(r"([\\`*_\[\]<>$|~&])")
#: what starts a heading, a list, a quote or a rule at the start of a line (or list item)
_LEADING = re.compile(r"^([#+=-]|\d+(?=[.)]))")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown: each character Markdown or TeX could read as syntax
    backslash-escaped (CommonMark shows an escaped punctuation character as itself), line
    breaks as spaces."""
    escaped = _SPECIAL.sub(r"\\\1", " ".join(text.split()))
    leading = _LEADING.match(escaped)
    if leading is None:
        return escaped
    if leading.group(1).isdigit():  # "1. x" is a list: "1\. x" is not
        end = leading.end()
        return f"{escaped[:end]}\\{escaped[end:]}"
    return f"\\{escaped}"


def summary_markdown(summary: NotebookSummary, symbol: str = "$") -> str:
    """The run's cost: its total, each GPU model's part, whether the GPUs were simulated,
    where a budget stopped it, and where the prices come from."""
    total = markdown_text(status_bar(to_units(summary.total_micro_usd), symbol))
    if summary.metered is None:
        text = _("**gpucost**: this run cost {total} over {n} priced cells.")
        headline = text.format(total=total, n=summary.cells)
    else:
        # the runner metered the run itself: that is its cost, the cells a part of it
        text = _(
            "**gpucost**: this run cost {metered} ({seconds} s metered by the runner); "
            "{total} of it over {n} priced cells."
        )
        metered = status_bar(to_units(int(summary.metered["cost_micro_usd"])), symbol)
        headline = text.format(
            metered=markdown_text(metered),
            seconds=f"{float(summary.metered['wall_s']):.1f}",
            total=total,
            n=summary.cells,
        )
    lines = [IGNORE_MATH, "", headline, ""]
    for name, micro in sorted(summary.by_gpu_micro_usd.items()):
        amount = markdown_text(status_bar(to_units(micro), symbol))
        lines.append(f"- {markdown_text(name)}: {amount}")
    if summary.simulated:
        text = _("Simulated GPUs ({trace}): not real GPUs; the cost is what they would cost.")
        lines.append("")
        lines.append(markdown_text(text.format(trace=summary.simulated_by)))
    if summary.stopped:
        lines.append("")
        lines.append(markdown_text(str(summary.stopped.get("note", ""))))
    if summary.price_sources:
        lines.append("")
        sources = "; ".join(summary.price_sources)
        lines.append(markdown_text(_("Prices: {sources}").format(sources=sources)))
    lines += ["", "</div>"]
    return "\n".join(lines)
