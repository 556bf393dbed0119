"""``embedbench report DIR --pr-comment OUT.md``: one GitHub comment, its figures, a zip.

The markdown is checked as GitHub reads it: pipe tables with a delimiter row and as many
cells in every row, a ``<details>`` block with its ``<summary>`` and the blank line that
lets markdown render inside it, images by relative paths that resolve to the PNGs written
beside the comment, and a reproducing command that the CLI parses back to the run's
parameters. Runs are built in memory (tests/test_figures.py); no harness run.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import platform
import re
import shlex
import sys
import types
import zipfile
from pathlib import Path

import nbformat
import pytest
from test_figures import make_result

from embedbench.cli import build_parser, config_from_args
from embedbench.config import RunConfig
from embedbench.errors import EmbedbenchError
from embedbench.report import prcomment, tables
from embedbench.report.html import render_html

ROOT = Path(__file__).resolve().parents[1]

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
    result.metadata["entry_point"] = "cli"  # recorded: it wins over the notebook beside it
    (tmp_path / "pr").mkdir()
    written = prcomment.write_pr_comment(result, tmp_path / "pr" / "comment.md")
    text = written.markdown.read_text(encoding="utf-8")

    assert text.startswith("### Qwen2.5-Omni embed_input_ids before/after")
    assert "**Qwen2.5-Omni** (CPU, reference target), 2 cases: fixed is faster in 2 (" in text
    tables = _tables(text)
    assert [t[0] for t in tables] == [
        "| Input | Before (μs) | After (μs) | Host latency reduction |",
        "| Input | Estimate | Interval | Level | Verdict | MDE | Host speed |",
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
    with pytest.raises(prcomment.PrCommentError, match="is a file, not a folder"):
        prcomment.check_destination(out / "comment.md")  # a file where a folder must be


# --- a missing folder, as --output-dir's ------------------------------------------------


def _report(monkeypatch, capsys, result, *args: str) -> tuple[int, str, str]:
    """``embedbench report DIR ARGS`` on an in-memory run; (exit code, stdout, stderr)."""
    from embedbench import cli
    from embedbench.report import results

    monkeypatch.setattr(results, "load_results", lambda _directory: result)
    code = cli.main(["report", str(result.directory), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_creates_a_missing_folder_for_the_comment_and_the_html(
    tmp_path, monkeypatch, capsys
):
    result, _ = _run(tmp_path)
    out = tmp_path / "out" / "pr" / "comment.md"
    page = tmp_path / "pages" / "report.html"
    code, stdout, err = _report(
        monkeypatch, capsys, result, "--pr-comment", str(out), "--html", str(page)
    )
    assert (code, err) == (0, "")
    assert out.is_file() and page.is_file() and (out.parent / "comment.zip").is_file()
    assert f"pr comment: {out}" in stdout
    with zipfile.ZipFile(out.parent / "comment.zip") as bundle:
        assert "report.html" in bundle.namelist()


def test_a_file_in_the_way_or_an_existing_comment_is_one_line_and_exit_2(
    tmp_path, monkeypatch, capsys
):
    result, _ = _run(tmp_path)
    blocker = tmp_path / "out"
    blocker.write_text("keep me", encoding="utf-8")
    for target in (blocker / "comment.md", blocker / "deeper" / "comment.md"):
        code, stdout, err = _report(monkeypatch, capsys, result, "--pr-comment", str(target))
        assert code == 2 and stdout == ""  # refused before the report is printed
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"embedbench: error: {blocker} is a file, not a folder")
    assert blocker.read_text(encoding="utf-8") == "keep me"
    existing = tmp_path / "done" / "comment.md"
    assert _report(monkeypatch, capsys, result, "--pr-comment", str(existing))[0] == 0
    before = existing.read_bytes()
    code, _, err = _report(monkeypatch, capsys, result, "--pr-comment", str(existing))
    assert code == 2 and "already exists; pass --overwrite" in err and err.count("\n") == 1
    assert existing.read_bytes() == before


# --- no local path ----------------------------------------------------------------------

HOME = "/home/alice"


def test_the_comment_names_the_checkpoint_without_local_paths(tmp_path):
    result, _ = _run(tmp_path)
    cache = f"{HOME}/.cache/embedbench/qwen2.5-omni-synthetic-152064x3584-bf16-v1"
    result.metadata.update(model=cache, synthetic=True)
    text = prcomment.comment_markdown(result)
    assert "| checkpoint | synthetic, Qwen2.5-Omni geometry 152064 × 3584 bf16 |" in text
    assert HOME not in text and HOME not in render_html(result)

    small = tables.provenance_table(_with(result, embedding_shape=[152064, 8]))
    assert small.loc["checkpoint", "value"] == (
        "synthetic, 152064 × 8 bf16 (not Qwen2.5-Omni's published geometry)"
    )
    real = _with(result, model=f"{HOME}/models/Qwen2.5-Omni-7B/", synthetic=False)
    real.metadata["config"] = {**real.metadata["config"], "model": real.metadata["model"]}
    text = prcomment.comment_markdown(real)
    assert "| checkpoint | Qwen2.5-Omni-7B |" in text
    assert "--model Qwen2.5-Omni-7B" in text  # the command's path by its last component
    assert HOME not in text and HOME not in render_html(real)
    relative = _with(real, config={**real.metadata["config"], "model": "models/Q"})
    assert "--model models/Q" in prcomment.reproduce_command(relative)  # no local prefix


def test_the_environment_table_names_the_interpreter_not_its_path(monkeypatch):
    from embedbench.harness import sysinfo

    facts = {"cpu_model": "Test CPU", "executable": f"{HOME}/venv/bin/python3.12"}
    monkeypatch.setattr(sysinfo, "host_facts", lambda: dict(facts))
    shown = tables.environment_table()["value"]["executable"]
    assert shown == f"python3.12 ({platform.python_implementation()} {platform.python_version()})"
    assert HOME not in " ".join(tables.environment_table()["value"])


def _with(result, **metadata):
    return dataclasses.replace(result, metadata={**result.metadata, **metadata})


# --- the command that reproduces the run, from where it was started ----------------------

SET = RunConfig(
    lengths=(512, 1172),
    cases=("text", "audio"),
    blocks=12,
    processes=3,
    allow_busy=True,
    baseline_ref="1234",  # a string papermill's -p would read as a number
    output_dir="runs/mine",
    overwrite=True,  # never part of the command: a rerun does not replace results
)


def _from_papermill(command: str) -> RunConfig:
    """The notebook's RunConfig for a papermill line, its values typed as papermill does."""
    from papermill.cli import _resolve_type

    argv = shlex.split(command)
    assert argv[:3] == ["papermill", "notebooks/run.ipynb", "OUT.ipynb"]
    params, rest = {}, argv[3:]
    while rest:
        flag, name, value, *rest = rest
        assert flag in ("-p", "-r")
        params[name] = _resolve_type(value) if flag == "-p" else value
    return RunConfig(**params)


def _from_python(command: str) -> RunConfig:
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-c"]
    call = ast.parse(argv[2]).body[-1].value.args[0]  # run(RunConfig(...))
    assert call.func.id == "RunConfig"
    return RunConfig(**{k.arg: ast.literal_eval(k.value) for k in call.keywords})


def _from_cli(command: str) -> RunConfig:
    argv = shlex.split(command)
    assert argv[:2] == ["embedbench", "run"]
    return config_from_args(build_parser().parse_args(argv[1:]))


@pytest.mark.parametrize(
    ("entry", "start", "parse"),
    [
        (
            "notebook",
            "papermill notebooks/run.ipynb OUT.ipynb -r baseline_ref 1234 -p lengths '[512, 1172]'",
            _from_papermill,
        ),
        ("cli", "embedbench run --baseline-ref 1234 --lengths 512 1172", _from_cli),
        ("api", "python -c 'from embedbench import RunConfig, run; run(RunConfig(", _from_python),
    ],
)
def test_the_command_is_the_entry_points_with_every_parameter_not_a_default(
    tmp_path, entry, start, parse
):
    result, _ = _run(tmp_path)
    result.metadata.update(config=SET.to_json(), entry_point=entry)
    command = prcomment.reproduce_command(result)
    assert command.startswith(start)
    assert "overwrite" not in command
    assert parse(command).to_json() == {**SET.to_json(), "overwrite": False}
    assert f"```sh\n{command}\n```" in prcomment.comment_markdown(result)


def test_a_run_that_recorded_no_entry_point_is_the_notebooks_where_it_lies_beside(tmp_path):
    result, config = _run(tmp_path)
    assert prcomment.reproduce_command(result).startswith("embedbench run ")
    folder = tmp_path / "results" / "notebooks"
    folder.mkdir()
    (folder / "run-20261201T120000Z.ipynb").write_text("{}", encoding="utf-8")
    command = prcomment.reproduce_command(result)  # make run's layout: the notebook's
    assert command.startswith("papermill notebooks/run.ipynb OUT.ipynb ")
    assert _from_papermill(command).to_json() == config.to_json()


def test_the_cli_and_the_run_notebook_say_where_they_started_a_run(monkeypatch):
    from embedbench import cli
    from embedbench.config import current_entry_point

    seen = []

    def fake_run(config, **_kw):
        seen.append(current_entry_point())
        raise EmbedbenchError("stop here")

    monkeypatch.setitem(sys.modules, "embedbench.runner", types.SimpleNamespace(run=fake_run))
    assert cli.main(["run", "--allow-busy"]) == 2
    assert seen == ["cli"] and current_entry_point() == "api"  # reset after the run
    notebook = nbformat.read(ROOT / "notebooks" / "run.ipynb", as_version=4)
    [cell] = [c.source for c in notebook.cells if "run(config" in c.source]
    assert "with entry_point(ENTRY_NOTEBOOK):\n    result = run(config" in cell
