"""Docs that can't rot: README.md and docs/*.md link only to what exists, their fenced
``make`` and ``papermill`` commands name real targets and notebook parameters (a dry
parse, nothing executed), no heading cites the project's issue numbers, and
docs/format.md's field tables match the output schemas and what a run writes.

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
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, ROOT / "CHANGELOG.md"]

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
    pages = {f"docs/{p.name}" for p in DOCS}
    assert pages <= linked, sorted(pages - linked)


def test_no_heading_or_sentence_cites_an_issue_number_or_spec_section():
    uncitable = re.compile(r"\b(SPEC|DESIGN)\b\s*§?|§\s*\d|\b[Ii]ssues? \d+\b")
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if uncitable.search(line):
                found.append(f"{page.name}:{number}: {line}")
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


# -- docs/format.md against the schemas (embedbench/report/schema.py) -------------------

FORMAT = ROOT / "docs" / "format.md"
ROW = re.compile(
    r"^\| `([a-z0-9_.]+)` \| ([a-z ]+) \| (required|checked|–) \| *(✓?) *\| (\d+) \|", re.M
)
# A file's table sits under the heading that names it (two files share the records' table).
TABLE_FILES = {
    "metadata.json": ("metadata.json",),
    "micro-raw.json and aa-raw.json": ("micro-raw.json", "aa-raw.json"),
    "validation.json": ("validation.json",),
    "summary.json": ("summary.json",),
    "work.json": ("work.json",),
}


@dataclasses.dataclass(frozen=True)
class DocField:
    types: frozenset[str]
    schema: str  # required, checked or – (not in the schema)
    original: bool


def documented_fields(text: str) -> dict[str, dict[str, DocField]]:
    """Each output file's table in ``text``: field name → what its row says."""
    tables: dict[str, dict[str, DocField]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        rows = {
            name: DocField(frozenset(types.split(" or ")), schema, bool(original))
            for name, types, schema, original, _ in ROW.findall(body)
        }
        for file in TABLE_FILES.get(heading.strip(), ()):
            tables[file] = rows
    return tables


def schema_fields(schema: dict) -> dict[str, tuple[str, frozenset[str] | None]]:
    """Field name → (required or checked, its JSON types where the schema names them) of a
    file's schema (an array's items for the row files), nested objects' fields dotted."""
    if schema.get("type") == "array":
        schema = schema["items"]
    found: dict[str, tuple[str, frozenset[str] | None]] = {}
    properties = schema.get("properties", {})
    for name in {*properties, *schema.get("required", ())}:
        spec = properties.get(name, {})
        kind = spec.get("type")
        types = None if kind is None else frozenset([kind] if isinstance(kind, str) else kind)
        found[name] = ("required" if name in schema.get("required", ()) else "checked", types)
        if "properties" in spec:
            found.update({f"{name}.{k}": v for k, v in schema_fields(spec).items()})
    return found


def format_problems(tables: dict[str, dict[str, DocField]], schemas: dict) -> list[str]:
    """Where the tables and the schemas disagree, in both directions, one line each."""
    problems = []
    for file, schema in schemas.items():
        rows = tables.get(file)
        if rows is None:
            problems.append(f"{file}: no table")
            continue
        fields = schema_fields(schema)
        for name, (role, types) in sorted(fields.items()):
            row = rows.get(name)
            if row is None:
                problems.append(f"{file}: {name} is in the schema, not in the table")
            elif row.schema != role:
                problems.append(f"{file}: {name} is {role} in the schema, {row.schema} here")
            elif types is not None and row.types != types:
                problems.append(f"{file}: {name} is {sorted(types)} in the schema")
        for name, row in sorted(rows.items()):
            if row.schema != "–" and name not in fields:
                problems.append(f"{file}: {name} is marked {row.schema}, not in the schema")
    return problems


def test_format_tables_match_the_schemas_in_both_directions():
    from embedbench.report.schema import SCHEMAS

    tables = documented_fields(FORMAT.read_text())
    assert set(tables) == set(SCHEMAS["embedbench"])
    assert format_problems(tables, SCHEMAS["embedbench"]) == []


def test_the_format_check_sees_a_missing_an_extra_and_a_wrong_field():
    schema = {
        "metadata.json": {
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"type": "string"}, "io_guard": {"type": ["object", "null"]}},
        }
    }
    text = (
        "## metadata.json\n\n| Field | Type | Schema | Orig. | Since | Meaning |\n"
        "| `status` | integer | required | | 1 | x |\n| `gone` | string | checked | | 1 | x |\n"
        "| `free` | string | – | | 1 | written, not checked |\n"
    )
    assert format_problems(documented_fields(text), schema) == [
        "metadata.json: io_guard is in the schema, not in the table",
        "metadata.json: status is ['string'] in the schema",
        "metadata.json: gone is marked checked, not in the schema",
    ]
    assert schema_fields({"properties": {"a": {"properties": {"b": {}}, "required": ["b"]}}}) == {
        "a": ("checked", None),
        "a.b": ("required", None),
    }


def test_the_orig_column_names_the_original_scripts_fields_and_its_schema_agrees():
    from helpers import (
        ORIGINAL_METADATA_KEYS,
        ORIGINAL_RECORD_KEYS,
        ORIGINAL_SUMMARY_KEYS,
        ORIGINAL_VALIDATION_KEYS,
    )

    from embedbench.report.schema import ORIGINAL_FORMAT, SCHEMAS

    tables = documented_fields(FORMAT.read_text())
    original = {
        "metadata.json": ORIGINAL_METADATA_KEYS,
        "micro-raw.json": ORIGINAL_RECORD_KEYS,
        "validation.json": ORIGINAL_VALIDATION_KEYS,
        "summary.json": ORIGINAL_SUMMARY_KEYS,
    }
    for file, keys in original.items():
        marked = {name for name, row in tables[file].items() if row.original}
        assert marked == set(keys), file
        # What the schema of the original's format requires, the original writes.
        assert set(_required(SCHEMAS[ORIGINAL_FORMAT][file])) <= marked, file


def _required(schema: dict) -> list[str]:
    return (schema["items"] if schema.get("type") == "array" else schema).get("required", [])


def test_every_field_a_run_writes_is_in_a_table(small_run_dir):
    import json

    tables = documented_fields(FORMAT.read_text())
    missing = []
    files = ("metadata.json", "micro-raw.json", "validation.json", "summary.json", "work.json")
    for file in files:
        data = json.loads((small_run_dir / file).read_text())
        written = set(data) if isinstance(data, dict) else {k for row in data for k in row}
        missing += [f"{file}: {name}" for name in sorted(written - set(tables[file]))]
    assert missing == []


def test_the_documented_schema_version_is_the_codes_and_each_has_a_row():
    from embedbench.report.schema import READABLE_VERSIONS, SCHEMA_VERSION

    text = FORMAT.read_text()
    current = re.search(r"The current schema version is \*\*(\d+)\*\*", text)
    assert current and int(current.group(1)) == SCHEMA_VERSION
    section = text.split("## Schema versions and the upgrade path", 1)[1]
    rows = [int(n) for n in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert rows == list(READABLE_VERSIONS) == list(range(1, SCHEMA_VERSION + 1))
