"""A run as one GitHub pull-request comment: markdown, the key figures beside it, a zip.

``embedbench report DIR --pr-comment OUT.md`` writes ``OUT.md`` (GitHub-flavoured
markdown: a headline sentence per family (and one on the counted work per call), the
PR-format table, the work-per-call table (and a line on each form's share of the memory
ceiling), the interval-and-verdict
table, the host-stability line, what the run does not establish, a ``<details>`` block with
the provenance and the command that reproduces the run, from where it was started), the
key figures as PNG files beside it (``OUT-forest.png``,
``OUT-paired.png``), referenced by relative path so they resolve where the comment is
previewed and can be dropped into the comment with it, and ``OUT.zip``: the results
directory, and the executed notebook and its HTML where they are found, for reviewers who
want everything (GitHub takes a .zip as an attachment; an .ipynb or .html it does not).

Nothing is overwritten unless asked: an existing output is refused (``--overwrite``
replaces them); a missing folder is created, as ``--output-dir``'s is. The comment names no
local path: the checkpoint by its geometry or folder name, a path parameter of the command
by its last component.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from embedbench.cases import CASE_LABELS
from embedbench.config import (
    ENTRY_API,
    ENTRY_CLI,
    ENTRY_NOTEBOOK,
    ENTRY_POINTS,
    RunConfig,
    cli_flag,
)
from embedbench.errors import ConfigError
from embedbench.harness import stats
from embedbench.report import bandwidth, banner, hostprose, limits, static, tables, work
from embedbench.report.markdown import frame_markdown
from embedbench.report.results import RunResult, write_text_atomic

__all__ = [
    "FIGURES",
    "NOTEBOOK",
    "NOT_REPRODUCED",
    "PATH_PARAMETERS",
    "PrComment",
    "PrCommentError",
    "api_command",
    "changed_parameters",
    "check_destination",
    "cli_command",
    "comment_markdown",
    "comment_paths",
    "entry_point_of",
    "headline_sentence",
    "host_line",
    "limits_markdown",
    "papermill_command",
    "public_value",
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
    verdict = hostprose.host_verdict(result.metadata)
    noisy = hostprose.host_label(result)
    if noisy:
        return f"Host stability: {noisy}."
    if verdict == hostprose.NOT_OBSERVED:
        return "Host stability: not observed (the run recorded no canary)."
    reading = result.metadata.get("host_stability") or {}
    between = reading.get("between_workers")
    spread = "" if between is None else f"; workers' canaries within {100 * between:.1f} %"
    note = hostprose.host_note(result)
    aside = f" Note: {note}." if note else ""
    return (
        f"Host stability: {verdict} (canary, {reading.get('canary_reads')} reads{spread})." + aside
    )


# Parameters that are paths: shortened to their last component when absolute, so the
# comment names no local folder (docs/usage.md, "A PR comment").
PATH_PARAMETERS = ("model", "repo", "output_dir")
# Left out of every command: it only says whether to replace results already there.
NOT_REPRODUCED = ("overwrite",)
NOTEBOOK = "notebooks/run.ipynb"


def entry_point_of(result: RunResult) -> str:
    """How the run was started: its recorded ``entry_point``; for a run that recorded
    none, ``notebook`` where the executed run notebook lies beside it (``make run``),
    else ``cli``."""
    recorded = result.metadata.get("entry_point")
    if recorded in ENTRY_POINTS:
        return str(recorded)
    return ENTRY_NOTEBOOK if run_notebooks(result) else ENTRY_CLI


def public_value(name: str, value: Any) -> Any:
    """A parameter's value as the comment shows it: an absolute path by its last
    component, anything else as it is."""
    if name in PATH_PARAMETERS and isinstance(value, str) and PurePath(value).is_absolute():
        return PurePath(value).name or value
    return value


def changed_parameters(config: dict[str, Any]) -> list[tuple[dataclasses.Field, Any]]:
    """The recorded parameters that differ from their defaults, in field order, with
    their public values (``overwrite`` left out: a rerun never replaces results)."""
    defaults = RunConfig().to_json()
    changed = []
    for param in dataclasses.fields(RunConfig):
        name = param.name
        if name in NOT_REPRODUCED or name not in config:
            continue
        value = config[name]
        if value is None or value == defaults.get(name):
            continue
        changed.append((param, public_value(name, value)))
    return changed


def cli_command(config: dict[str, Any]) -> str:
    """``embedbench run`` with every parameter that differs from its default."""
    argv = ["embedbench", "run"]
    for param, value in changed_parameters(config):
        flag = cli_flag(param)
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return shlex.join(argv)


def _papermill_retypes(text: str) -> bool:
    """Whether papermill's ``-p`` would read ``text`` as something other than a string
    (True, False, None or a number): such a string goes with ``-r``, as it is."""
    if text in ("True", "False", "None"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def papermill_command(config: dict[str, Any], out: str = "OUT.ipynb") -> str:
    """``papermill notebooks/run.ipynb OUT.ipynb -p name value ...`` with every parameter
    that differs from its default (lists as JSON, which the notebook's config reads)."""
    argv = ["papermill", NOTEBOOK, out]
    for param, value in changed_parameters(config):
        if isinstance(value, list | tuple):
            argv += ["-p", param.name, json.dumps(list(value))]
        elif isinstance(value, str) and _papermill_retypes(value):
            argv += ["-r", param.name, value]
        else:
            argv += ["-p", param.name, str(value)]
    return shlex.join(argv)


def api_command(config: dict[str, Any]) -> str:
    """A ``python -c`` line calling ``run(RunConfig(...))`` with every parameter that
    differs from its default."""
    arguments = ", ".join(f"{p.name}={value!r}" for p, value in changed_parameters(config))
    code = f"from embedbench import RunConfig, run; run(RunConfig({arguments}))"
    return shlex.join(["python", "-c", code])


def reproduce_command(result: RunResult) -> str:
    """The command that repeats the run from where it was started (``entry_point_of``):
    the run notebook's papermill line, the ``embedbench run`` line or the Python call,
    each with every recorded parameter that differs from its default (``public_value``
    for paths; ``OUT.ipynb`` stands for the executed notebook's name)."""
    config = result.metadata.get("config") or {}
    if not config:
        return "embedbench run  # this run recorded no parameters (an older results format)"
    commands = {ENTRY_NOTEBOOK: papermill_command, ENTRY_API: api_command}
    return commands.get(entry_point_of(result), cli_command)(config)


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
    lines = [f"### {tables.headline(result)}", "", headline_sentence(result)]
    sentence = work.work_sentence(result)
    lines += [sentence] if sentence else []
    lines += ["", tables.to_pr_markdown(tables.pr_table(result))]
    if sentence:
        lines += ["", "**Work per call** (counted, not timed)", ""]
        lines += [tables.to_pr_markdown(work.work_table(result))]
        share = bandwidth.share_sentence(result)
        lines += ["", share] if share else []
    lines += [
        "",
        "**Interval and verdict**" + (f" (interval: {method})" if method else ""),
        "",
        frame_markdown(verdict),
        "",
        host_line(result),
    ]
    for status in banner.status_lines(result):
        lines += ["", f"> {status}"]
    lines += ["", limits_markdown(result)]
    for path, alt in figures:
        lines += ["", f"![{_alt(alt)}]({path})"]
    lines += ["", _details(result), ""]
    return "\n".join(lines)


def limits_markdown(result: RunResult) -> str:
    """What the run does not establish (``limits.not_established``), as a bulleted list."""
    items = [f"- {item}" for item in limits.not_established(result.metadata)]
    return "\n".join([f"**{limits.TITLE}**", "", *items])


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


def _check_folder(folder: Path) -> None:
    """Refuse a folder that cannot be made or written: one of its parents is a file, or
    the nearest existing one is not writable (a real probe, as ``--output-dir``'s)."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        raise PrCommentError(f"{existing} is a file, not a folder; choose another OUT.md")
    try:
        tempfile.TemporaryDirectory(prefix=".embedbench-probe-", dir=existing).cleanup()
    except OSError as exc:
        raise PrCommentError(
            f"{existing} is not writable ({exc.strerror or exc}); choose another OUT.md"
        ) from None


def check_destination(out: str | Path, *, overwrite: bool = False) -> None:
    """Refuse, writing nothing, an OUT that is not ``.md``, one whose folder cannot be
    made or written, or one whose files exist (unless ``overwrite``), with a one-line
    reason. A missing folder is not refused: ``write_pr_comment`` creates it."""
    markdown, figure_paths, archive = comment_paths(out)
    if markdown.suffix != ".md":
        raise PrCommentError(f"--pr-comment wants a .md file, got {markdown.name}")
    _check_folder(markdown.parent)
    _refuse_existing([markdown, *figure_paths, archive], overwrite)


def write_pr_comment(
    result: RunResult,
    out: str | Path,
    *,
    overwrite: bool = False,
    extra: Sequence[str | Path] = (),
) -> PrComment:
    """Write the comment (``comment_markdown``), its figures and the zip for ``OUT.md``,
    creating its folder (and the missing ones above it) as ``--output-dir`` does;
    ``extra`` files (an HTML report written alongside) go into the zip too. Refuses,
    before writing anything, what ``check_destination`` refuses; a write that fails is
    one line too."""
    check_destination(out, overwrite=overwrite)
    markdown, figure_paths, archive = comment_paths(out)
    try:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        shown = []
        for path, (_, draw) in zip(figure_paths, FIGURES, strict=True):
            figure = draw(result)
            path.write_bytes(figure.png())
            shown.append((path.name, figure.alt_text))
        write_text_atomic(markdown, comment_markdown(result, shown))
        ours = (markdown, *figure_paths, archive)
        names = _write_archive(result, archive, ours=ours, extra=extra)
    except OSError as exc:
        raise PrCommentError(
            f"cannot write the PR comment at {markdown} ({exc.strerror or exc})"
        ) from None
    return PrComment(markdown, figure_paths, archive, tuple(names))


def _write_archive(
    result: RunResult, archive: Path, *, ours: Sequence[Path], extra: Sequence[str | Path]
) -> list[str]:
    """The zip: the results directory (less the comment's own files, should they lie in
    it), then the executed notebook and its HTML where found, then ``extra``."""
    directory = Path(result.directory)
    names = []
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        own = {p.resolve() for p in ours}
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            if path.resolve() in own:
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
    return names
