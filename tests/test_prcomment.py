"""``embedbench report DIR --pr-comment OUT.md``: one GitHub comment, its figures, a zip.

The markdown is checked as GitHub reads it: pipe tables with a delimiter row and as many
cells in every row, a ``<details>`` block with its ``<summary>`` and the blank line that
lets markdown render inside it, images by relative paths that resolve to the PNGs written
beside the comment, and a reproducing command that the CLI parses back to the run's
parameters. Runs are built in memory (tests/test_figures.py); no harness run.
"""

from __future__ import annotations

import json
import re
import shlex
import zipfile

import pytest
from test_figures import make_result

from embedbench.cli import build_parser, config_from_args
from embedbench.config import RunConfig
from embedbench.report import prcomment

DELIMITER = re.compile(r"^\|(?: *:?-{3,}:? *\|)+$")
IMAGE = re.compile(r"!\[([^\]\n]*)\]\(([^)\s]+)\)")


def _run(tmp_path, **kw):
    directory = tmp_path / "results" / "20261201T120000Z"
    directory.mkdir(parents=True)
    result = make_result(directory=str(directory), **kw)
    config = RunConfig(lengths=(1172,), blocks=12, processes=3, warmup=2, allow_busy=True)
    result.metadata["config"] = config.to_json()
    for name in ("metadata.json", "summary.json"):
        (directory / name).write_text(json.dumps({"name": name}), encoding="utf-8")
    return result, config


def _tables(text: str) -> list[list[str]]:
    """Every pipe table: its consecutive lines that start with a pipe."""
    found, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


def _cells(line: str) -> int:
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


def test_the_comment_is_github_markdown_with_its_tables_details_and_images(tmp_path):
    result, config = _run(tmp_path)
    (tmp_path / "results" / "notebooks").mkdir()
    notebook = tmp_path / "results" / "notebooks" / "run-20261201T120000Z.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    (tmp_path / "pr").mkdir()
    written = prcomment.write_pr_comment(result, tmp_path / "pr" / "comment.md")
    text = written.markdown.read_text(encoding="utf-8")

    assert text.startswith("### Qwen2.5-Omni embed_input_ids before/after")
    assert "**Qwen2.5-Omni** (CPU, reference target), 2 cases: fixed is faster in 2 (" in text
    tables = _tables(text)
    assert [t[0] for t in tables] == [
        "| Input | Before (μs) | After (μs) | Host latency reduction |",
        "| Input | Interval | Level | Verdict | MDE | Host speed |",
        "| field | value |",
    ]  # the PR's, the verdict's, the provenance
    for table in tables:
        assert DELIMITER.match(table[1]), table[1]
        assert len({_cells(line) for line in table}) == 1, table  # every row as wide
        assert len(table) >= 4
    assert "**Interval and verdict** (interval: t over 3 worker processes (2 df))" in text
    assert re.search(r"^Host stability: .+\.$", text, re.M)

    details = text[text.index("<details>") : text.index("</details>")]
    assert details.startswith("<details>\n<summary>Provenance and the command")
    assert "</summary>\n\n|" in details  # the blank line GitHub needs to render markdown
    [command] = re.findall(r"```sh\n(.+?)\n```", details)
    argv = shlex.split(command)
    assert argv[:2] == ["embedbench", "run"]
    parsed = config_from_args(build_parser().parse_args(argv[1:]))
    assert parsed.to_json() == config.to_json()  # the same run, output dir aside

    images = IMAGE.findall(text)
    assert [path for _, path in images] == ["comment-forest.png", "comment-paired.png"]
    for alt, path in images:
        image = written.markdown.parent / path  # relative to the comment: it resolves
        assert image.is_file() and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(alt) > 40 and "[" not in alt and "]" not in alt
    assert list(written.figures) == [written.markdown.parent / p for _, p in images]

    with zipfile.ZipFile(written.archive) as bundle:
        names = bundle.namelist()
    assert names == [
        "20261201T120000Z/metadata.json",
        "20261201T120000Z/summary.json",
        "run-20261201T120000Z.ipynb",
    ]
    assert list(written.archived) == names


def test_a_slower_case_is_named_in_the_headline(tmp_path):
    result, _ = _run(tmp_path, reduction=-0.2, cases=("audio",))
    assert prcomment.headline_sentence(result) == (
        "**Qwen2.5-Omni** (CPU, reference target), 1 case: slower in 1 (Audio)."
    )


def test_nothing_is_overwritten_unless_asked_and_a_bad_out_is_refused(tmp_path):
    result, _ = _run(tmp_path)
    out = tmp_path / "comment.md"
    prcomment.write_pr_comment(result, out)
    before = out.read_text(encoding="utf-8")
    (tmp_path / "comment-paired.png").unlink()
    for existing in (out, tmp_path / "comment.zip"):  # any one of its files is enough
        with pytest.raises(prcomment.PrCommentError, match="already exists; pass --overwrite"):
            prcomment.check_destination(out)
        if existing == out:
            out.rename(tmp_path / "moved.md")
    (tmp_path / "moved.md").rename(out)
    with pytest.raises(prcomment.PrCommentError) as refused:
        prcomment.write_pr_comment(result, out)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "comment-paired.png").exists()  # refused before writing anything
    prcomment.write_pr_comment(result, out, overwrite=True)
    assert out.read_text(encoding="utf-8") == before
    assert (tmp_path / "comment-paired.png").is_file()
    with pytest.raises(prcomment.PrCommentError, match=r"wants a \.md file"):
        prcomment.check_destination(tmp_path / "comment.txt")
    with pytest.raises(prcomment.PrCommentError, match="is not a folder"):
        prcomment.check_destination(tmp_path / "missing" / "comment.md")
