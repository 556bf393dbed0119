"""The one markdown writer: the PR's unpadded layout, one alignment mark per column."""

import pandas as pd
import pytest

from embedbench.report.markdown import frame_markdown, markdown_table


def test_rows_are_unpadded_under_a_rule_of_one_mark_per_column():
    text = markdown_table(["Input", "Before (μs)"], [["Text", "18.81"]], align="lr")
    assert text.splitlines() == ["| Input | Before (μs) |", "| --- | ---: |", "| Text | 18.81 |"]
    with pytest.raises(ValueError, match="one character per column"):
        markdown_table(["a", "b"], [], align="l")


def test_a_frame_is_written_by_its_columns_without_its_index():
    frame = pd.DataFrame({"case": ["audio"], "verdict": [None]}, index=[7])
    assert frame_markdown(frame).splitlines()[2] == "| audio |  |"
