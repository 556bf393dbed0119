"""What a run does not establish: the items that apply to it, worded once
(``limits.not_established``) and shown in the notebooks, the HTML page and the PR comment.

Runs are built in memory (tests/test_figures.py); no harness run.
"""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import nbformat
import pytest
from test_figures import make_result

from embedbench.report import limits, prcomment, sections
from embedbench.report.html import render_html

ROOT = Path(__file__).resolve().parents[1]


def _run(**metadata):
    result = make_result()
    return dataclasses.replace(result, metadata={**result.metadata, **metadata})


@pytest.mark.parametrize(
    ("device", "synthetic", "cpu_item", "synthetic_item"),
    [
        ("cpu", True, True, True),
        ("cpu", False, True, False),
        ("cuda", True, False, True),
        ("cuda", False, False, False),
    ],
)
def test_only_the_items_that_apply_to_the_run_are_listed(
    device, synthetic, cpu_item, synthetic_item
):
    items = limits.not_established({"device": device, "synthetic": synthetic})
    text = " ".join(items)
    assert "host latency, not end-to-end throughput" in text
    assert "did not show up as a consistent end-to-end gain" in text
    assert "batch invariance" in text and "full model's output equality" in text
    assert ("memory copy" in text and "kernel launch" in text) == cpu_item
    assert ("real geometry" in text and "not the real weights" in text) == synthetic_item
    assert len(items) == 2 + cpu_item + synthetic_item


def test_a_synthetic_checkpoint_of_another_geometry_says_it_has_neither():
    real = limits.not_established(
        {"synthetic": True, "embedding_shape": [152064, 3584], "dtype": "bfloat16"}
    )
    assert real[-1] == (
        "The checkpoint is synthetic: it has the real geometry (152064 × 3584 bf16), "
        "not the real weights."
    )
    small = limits.not_established(
        {"synthetic": True, "embedding_shape": [152064, 32], "dtype": "bfloat16"}
    )
    assert "neither the real weights nor Qwen2.5-Omni's published geometry" in small[-1]


def test_the_html_page_and_the_comment_list_the_runs_items():
    for device, synthetic in (("cpu", True), ("cuda", False)):
        result = _run(device=device, synthetic=synthetic)
        items = limits.not_established(result.metadata)
        page = render_html(result)
        section = page[page.index(f"<h2>{html.escape(limits.TITLE)}</h2>") :]
        listed = re.search(r"<ul>(.*?)</ul>", section, re.S).group(1)
        assert re.findall(r"<li>(.*?)</li>", listed) == [html.escape(i) for i in items]
        text = prcomment.comment_markdown(result)
        block = text[text.index(f"**{limits.TITLE}**") :].split("\n\n")[1]
        assert block.splitlines() == [f"- {item}" for item in items]
        assert ("memory copy" in text) == (device == "cpu")
        assert ("not the real weights" in text) == synthetic


def test_the_run_and_report_notebooks_have_the_section():
    calls = [f"show(sections.{s.name}(result))" for s in sections.REPORT_SECTIONS]
    assert "show(sections.not_established(result))" in calls
    for name in ("run.ipynb", "report.ipynb"):
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        sources = [c.source for c in nb.cells]
        assert f"### {limits.TITLE}" in "\n".join(sources), name
        assert "show(sections.not_established(result))" in sources, name
