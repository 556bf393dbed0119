"""A run as one GitHub pull-request comment: markdown, the key figures beside it, a zip.

``embedbench report DIR --pr-comment OUT.md`` writes ``OUT.md`` (GitHub-flavoured
markdown: a headline sentence per family, the PR-format table, the interval-and-verdict
table, the host-stability line, a ``<details>`` block with the provenance and the command
that reproduces the run), the key figures as PNG files beside it (``OUT-forest.png``,
``OUT-paired.png``), referenced by relative path so they resolve where the comment is
previewed and can be dropped into the comment with it, and ``OUT.zip``: the results
directory, and the executed notebook and its HTML where they are found, for reviewers who
want everything (GitHub takes a .zip as an attachment; an .ipynb or .html it does not).

Nothing is overwritten unless asked: an existing output is refused (``--overwrite``
replaces them).
"""

from __future__ import annotations

import dataclasses
import shlex
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedbench.cases import CASE_LABELS
from embedbench.config import RunConfig, cli_flag
from embedbench.errors import ConfigError
from embedbench.harness import stats
from embedbench.report import static, tables
from embedbench.report.markdown import frame_markdown
from embedbench.report.results import RunResult, write_text_atomic

__all__ = [
    "FIGURES",
    "PrComment",
    "PrCommentError",
    "check_destination",
    "comment_markdown",
    "comment_paths",
    "headline_sentence",
    "host_line",
    "reproduce_command",
    "run_notebooks",
    "write_pr_comment",
]

# The key figures: (file suffix, the figure function, what the image shows).
FIGURES: tuple[tuple[str, Any], ...] = (
    ("forest", static.reduction_forest),
    ("paired", static.paired_blocks),
)


class PrCommentError(ConfigError):
    """The comment cannot be written where asked (a one-line reason; the CLI exits 2)."""


@dataclass(frozen=True)
class PrComment:
    """What ``write_pr_comment`` wrote."""

    markdown: Path
    figures: tuple[Path, ...]
    archive: Path
    archived: tuple[str, ...]  # the names inside the zip


def comment_paths(out: str | Path) -> tuple[Path, tuple[Path, ...], Path]:
    """The markdown file, the figures beside it and the zip, for ``OUT.md``."""
    markdown = Path(out)
    stem = markdown.name[: -len(".md")] if markdown.name.endswith(".md") else markdown.name
    figures = tuple(markdown.with_name(f"{stem}-{name}.png") for name, _ in FIGURES)
    return markdown, figures, markdown.with_name(f"{stem}.zip")


def _fmt_pct(value: float) -> str:
    return f"{value:.1f} %"


def headline_sentence(result: RunResult) -> str:
    """One sentence for the run's family: how many cases were faster, slower or neither,
    and the range of the faster cases' reductions."""
    rows = [r for r in tables.ordered_rows(result) if r.get("valid")]
    family = tables.family_label(result.metadata)
    setup = f"{tables.device_label(result.metadata)}, {result.metadata.get('target')} target"
    if not rows:
        return f"**{family}** ({setup}): no case was measured validly."
    faster = [r for r in rows if r.get("verdict") == stats.FASTER]
    slower = [r for r in rows if r.get("verdict") == stats.SLOWER]
    neither = sum(r.get("verdict") == stats.NO_DIFFERENCE for r in rows)
    parts = []
    if faster:
        values = sorted(float(r["reduction_pct"]) for r in faster)
        span = (
            _fmt_pct(values[0])
            if len(values) == 1
            else f"{_fmt_pct(values[0])} to {_fmt_pct(values[-1])}"
        )
        parts.append(f"fixed is faster in {len(faster)} ({span} lower host latency)")
    if slower:
        names = ", ".join(CASE_LABELS.get(r["case"], r["case"]) for r in slower)
        parts.append(f"slower in {len(slower)} ({names})")
    if neither:
        parts.append(f"no detectable difference in {neither}")
    invalid = len(tables.ordered_rows(result)) - len(rows)
    if invalid:
        parts.append(f"{invalid} not measured validly")
    total = len(rows) + invalid
    cases = f"{total} case{'s' if total != 1 else ''}"
    return f"**{family}** ({setup}), {cases}: " + "; ".join(parts) + "."


def host_line(result: RunResult) -> str:
    """The host-stability line: the canary's verdict and, when noisy, why."""
    verdict = tables.host_verdict(result.metadata)
    noisy = tables.host_label(result)
    if noisy:
        return f"Host stability: {noisy}."
    if verdict == tables.NOT_OBSERVED:
        return "Host stability: not observed (the run recorded no canary)."
    reading = result.metadata.get("host_stability") or {}
    between = reading.get("between_workers")
    spread = "" if between is None else f"; workers' canaries within {100 * between:.1f} %"
    note = tables.host_note(result)
    aside = f" Note: {note}." if note else ""
    return (
        f"Host stability: {verdict} (canary, {reading.get('canary_reads')} reads{spread})." + aside
    )


def reproduce_command(result: RunResult) -> str:
    """The ``embedbench run`` command that repeats the run: every recorded parameter that
    differs from its default, spelled as the CLI spells it (the output dir left out: a
    rerun writes a fresh one)."""
    config = result.metadata.get("config") or {}
    if not config:
        return "embedbench run  # this run recorded no parameters (an older results format)"
    defaults = RunConfig().to_json()
    argv = ["embedbench", "run"]
    for param in dataclasses.fields(RunConfig):
        name = param.name
        if name in ("output_dir", "overwrite") or name not in config:
            continue
        value = config[name]
        if value == defaults.get(name) or value is None:
            continue
        flag = cli_flag(param)
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return shlex.join(argv)


def _details(result: RunResult) -> str:
    provenance = frame_markdown(tables.provenance_table(result).reset_index())
    return "\n".join(
        [
            "<details>",
            "<summary>Provenance and the command that reproduces this run</summary>",
            "",
            provenance,
            "",
            "```sh",
            reproduce_command(result),
            "```",
            "",
            "</details>",
        ]
    )


def comment_markdown(result: RunResult, figures: Sequence[tuple[str, str]] = ()) -> str:
    """The comment's markdown; ``figures`` are (relative path, alt text) of the images."""
    verdict, _, method = tables.verdict_tables(result)
    lines = [
        f"### {tables.headline(result)}",
        "",
        headline_sentence(result),
        "",
        tables.to_pr_markdown(tables.pr_table(result)),
        "",
        "**Interval and verdict**" + (f" (interval: {method})" if method else ""),
        "",
        frame_markdown(verdict),
        "",
        host_line(result),
    ]
    for status in tables.status_lines(result):
        lines += ["", f"> {status}"]
    for path, alt in figures:
        lines += ["", f"![{_alt(alt)}]({path})"]
    lines += ["", _details(result), ""]
    return "\n".join(lines)


def _alt(text: str) -> str:
    """Alt text safe inside ``![...]``: one line, no brackets, short."""
    flat = " ".join(text.replace("[", "(").replace("]", ")").split())
    return flat if len(flat) <= 200 else flat[:197] + "..."


def run_notebooks(result: RunResult) -> list[Path]:
    """The executed notebook and its HTML of a run ``make run`` wrote, where they are:
    ``notebooks/run-<stamp>.ipynb`` and ``.html`` beside the results directory ``<stamp>``."""
    directory = Path(result.directory)
    folder = directory.parent / "notebooks"
    found = [folder / f"run-{directory.name}{suffix}" for suffix in (".ipynb", ".html")]
    return [path for path in found if path.is_file()]


def _refuse_existing(paths: Iterable[Path], overwrite: bool) -> None:
    for path in paths:
        if path.exists() and not path.is_file():
            raise PrCommentError(f"{path} exists and is not a file; choose another OUT.md")
        if path.exists() and not overwrite:
            raise PrCommentError(
                f"{path} already exists; pass --overwrite to replace it or choose another OUT.md"
            )


def check_destination(out: str | Path, *, overwrite: bool = False) -> None:
    """Refuse, writing nothing, an OUT that is not ``.md``, one in a missing folder, or
    one whose files exist (unless ``overwrite``), with a one-line reason."""
    markdown, figure_paths, archive = comment_paths(out)
    if markdown.suffix != ".md":
        raise PrCommentError(f"--pr-comment wants a .md file, got {markdown.name}")
    if not markdown.parent.is_dir():
        raise PrCommentError(f"{markdown.parent} is not a folder; create it first")
    _refuse_existing([markdown, *figure_paths, archive], overwrite)


def write_pr_comment(
    result: RunResult,
    out: str | Path,
    *,
    overwrite: bool = False,
    extra: Sequence[str | Path] = (),
) -> PrComment:
    """Write the comment (``comment_markdown``), its figures and the zip for ``OUT.md``;
    ``extra`` files (an HTML report written alongside) go into the zip too. Refuses, before
    writing anything, an OUT that is not ``.md``, a missing parent folder, or an existing
    output unless ``overwrite``."""
    check_destination(out, overwrite=overwrite)
    markdown, figure_paths, archive = comment_paths(out)
    shown = []
    for path, (_, draw) in zip(figure_paths, FIGURES, strict=True):
        figure = draw(result)
        path.write_bytes(figure.png())
        shown.append((path.name, figure.alt_text))
    write_text_atomic(markdown, comment_markdown(result, shown))
    directory = Path(result.directory)
    names = []
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        ours = {p.resolve() for p in (markdown, *figure_paths, archive)}
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            if path.resolve() in ours:
                continue
            name = f"{directory.name}/{path.relative_to(directory)}"
            bundle.write(path, name)
            names.append(name)
        seen = set()
        for path in [*run_notebooks(result), *(Path(p) for p in extra)]:
            if path.is_file() and path.resolve() not in seen:
                seen.add(path.resolve())
                bundle.write(path, path.name)
                names.append(path.name)
    return PrComment(markdown, figure_paths, archive, tuple(names))
