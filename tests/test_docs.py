"""Docs that can't rot: README.md and docs/*.md link only to what exists, their fenced
``make`` and ``papermill`` commands name real targets and notebook parameters (a dry
parse, nothing executed), and no heading cites the project's issue numbers.

The fenced ``embedbench`` commands are parsed by the real parser in
tests/test_readme_parameters.py."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest

from embedbench.config import CompareConfig, ReportConfig, RunConfig

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages another engineer keeps as they are (the evidence log): links still checked.
LOGS = {"PERFORMANCE.md"}

FENCE = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The page without its fenced blocks and inline code (where a link is not a link)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, blanks to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text()), re.M)
    return {_slug(h) for h in headings}


def _links() -> list[tuple[str, str]]:
    return [
        (page.relative_to(ROOT).as_posix(), target)
        for page in PAGES
        for target in LINK.findall(_prose(page.read_text()))
        if not re.match(r"[a-z]+:", target)  # https:, mailto: ...
    ]


def test_every_relative_link_and_image_resolves_with_its_anchor():
    links = _links()
    assert len(links) >= 20  # the front page's docs list, screenshots, cross-links
    broken = []
    for page, target in links:
        file, _, anchor = target.partition("#")
        path = (ROOT / page).parent / file if file else ROOT / page
        if not path.exists():
            broken.append(f"{page}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{page}: {target} (no such heading)")
    assert broken == []


def test_the_link_check_sees_a_missing_file_and_a_missing_heading():
    assert _slug("Results on this project's CI machine (2-core VM, CPU, embedded default)") == (
        "results-on-this-projects-ci-machine-2-core-vm-cpu-embedded-default"
    )
    assert "worker-processes-and-the-interval" in _anchors(ROOT / "docs" / "method.md")
    assert "no-such-heading" not in _anchors(ROOT / "docs" / "method.md")
    assert LINK.findall("see [x](docs/nope.md#a) and ![y](docs/p.png)") == [
        "docs/nope.md#a",
        "docs/p.png",
    ]
    assert LINK.findall(_prose("`[x](in-code.md)`\n```\n[y](fenced.md)\n```\n")) == []


def test_the_front_page_is_short_and_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    linked = {target.partition("#")[0] for target in LINK.findall(_prose(readme))}
    pages = {f"docs/{p.name}" for p in PAGES[1:]}
    assert pages <= linked, sorted(pages - linked)


def test_no_heading_or_sentence_cites_an_issue_number_or_spec_section():
    uncitable = re.compile(r"\b(SPEC|DESIGN)\b\s*§?|§\s*\d|\b[Ii]ssues? \d+\b")
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            is_heading = line.startswith("#") and not line.startswith("#!")
            if uncitable.search(line) and (is_heading or page.name not in LOGS):
                found.append(f"{page.name}:{number}: {line}")
    found = [f for f in found if not f.startswith(tuple(f"{n}:" for n in LOGS))]
    assert found == []


def _fenced_commands(program: str) -> list[tuple[str, list[str]]]:
    """Every ``program ...`` line of a fenced block (joined at a trailing backslash, split
    at ``&&``, comment dropped), as its page's name and argv."""
    found = []
    for page in PAGES:
        for block in FENCE.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                for command in line.split(" #")[0].split("&&"):
                    if command.strip().startswith(f"{program} "):
                        found.append((page.name, shlex.split(command, comments=True)))
    return found


def _makefile_targets_and_variables() -> tuple[set[str], set[str]]:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    variables = set(re.findall(r"\$\(([A-Z_]+)\)", makefile))
    return targets, variables


def test_every_fenced_make_command_names_a_real_target_and_variables():
    targets, variables = _makefile_targets_and_variables()
    commands = _fenced_commands("make")
    assert {argv[1] for _, argv in commands} >= {"run", "test", "report", "compare"}
    for page, argv in commands:
        assert argv[1] in targets, (page, argv)
        for word in argv[2:]:
            name, equals, _ = word.strip("[]").partition("=")
            assert equals and name in variables, (page, argv, word)


# Each notebook's parameters are the fields of one config class (scripts/build_notebooks.py).
NOTEBOOK_CONFIG = {
    "notebooks/run.ipynb": RunConfig,
    "notebooks/report.ipynb": ReportConfig,
    "notebooks/compare.ipynb": CompareConfig,
}


def test_every_fenced_papermill_command_parses_and_names_real_parameters():
    cli = pytest.importorskip("papermill.cli")
    yaml = pytest.importorskip("yaml")
    commands = [(p, a) for p, a in _fenced_commands("papermill") if "--help-notebook" not in a]
    assert {argv[1] for _, argv in commands} == set(NOTEBOOK_CONFIG)
    for page, argv in commands:
        context = cli.papermill.make_context("papermill", argv[1:])  # parses, runs nothing
        notebook = context.params["notebook_path"]
        assert (ROOT / notebook).exists(), (page, argv)
        given = dict(context.params["parameters"])
        for text in context.params["parameters_yaml"]:
            given.update(yaml.safe_load(text))
        fields = {f.name for f in dataclasses.fields(NOTEBOOK_CONFIG[notebook])}
        assert set(given) <= fields, (page, argv, set(given) - fields)
        if notebook == "notebooks/run.ipynb":
            RunConfig(**given)  # the notebook's own coercion and checks: a ConfigError fails
