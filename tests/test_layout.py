"""The tree shows the pipeline, and its import rule holds (docs/development.md, "Layout").

- ``embedbench/harness``: how to time fairly; knows no model.
- ``embedbench/omni``: the Qwen2.5-Omni / vLLM-Omni domain; only the run side uses it.
- ``embedbench/report``: reading and showing results; no torch.

Harness and report never import ``embedbench.omni`` or the run-side modules, and nothing
the report side imports (its own modules and the harness modules it reaches) imports
torch, even inside a function. Checked from the source (every import statement, at any
depth), so a lazy import that a test run never reaches cannot slip through. The one part
of the domain the report side may read is the family registry
(``embedbench.omni.families`` and its family modules, not their ``replicas``), which is
held to the same rule: nothing in it imports torch or the rest of the domain.

Family names (each registered family's name, label and model type, however spelt) appear
in code only in that family's own modules: ``embedbench/omni/families/<family>.py`` and
``embedbench/omni/families/replicas/<family>.py``. Checked over the package and
``benchmarks/`` (identifiers and string literals; docstrings and comments are prose and
may name a family as an example); tests, docs, notebooks and ``scripts/`` are exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from embedbench.omni import families

PACKAGE = Path(__file__).resolve().parents[1] / "embedbench"
RUN_SIDE = (
    "embedbench.runner",
    "embedbench.runhost",
    "embedbench.spawn",
    "embedbench.measure",
    "embedbench.worker",
    "embedbench.sim",
)
FRONT_ENDS = ("embedbench.cli", "embedbench.__main__", "embedbench.selftest")
OMNI = "embedbench.omni"
# The family registry, which the report side may read, and the families' torch side.
REGISTRY = "embedbench.omni.families"
REPLICAS = "embedbench.omni.families.replicas"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(source: str, importer: str) -> set[str]:
    """Every module an import statement in ``source`` names, at any depth.

    ``from pkg import name`` counts as ``pkg.name`` when that is a module of the package,
    else as ``pkg``; relative imports are resolved against ``importer``.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = importer.split(".")
                anchor = anchor[: len(anchor) - node.level + (importer in _PACKAGES)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return found


_PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer(name: str) -> str:
    for prefix in ("embedbench.harness", "embedbench.omni", "embedbench.report"):
        if _within(name, (prefix,)):
            return prefix.split(".")[1]
    return "top"


def in_registry(name: str) -> bool:
    """A module of the torch-free family registry (not a family's replica module)."""
    return _within(name, (REGISTRY,)) and not _within(name, (REPLICAS,))


def violations(name: str, imports: set[str]) -> list[str]:
    """What module ``name`` (importing ``imports``) does against the layout's rule."""
    if layer(name) not in ("harness", "report"):
        return []
    bad = [m for m in imports if _within(m, (OMNI, *RUN_SIDE, *FRONT_ENDS)) and not in_registry(m)]
    if layer(name) == "harness":
        bad += [m for m in imports if _within(m, ("embedbench.report",))]
    else:
        bad += [m for m in imports if _within(m, ("torch",))]
    return sorted(f"{name} imports {m}" for m in bad)


def _imports_of(name: str) -> set[str]:
    return imported_modules(MODULES[name].read_text(encoding="utf-8"), name)


def report_side_closure() -> set[str]:
    """The package's modules that importing any report module can reach (the registry
    imports its family modules by name, so they are reached with it)."""
    seen: set[str] = set()
    todo = [name for name in MODULES if layer(name) == "report" or in_registry(name)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [m for m in _imports_of(name) if m in MODULES]
    return seen


def test_the_tree_has_the_three_stages_and_a_thin_top():
    layers: dict[str, set[str]] = {}
    for name in MODULES:
        layers.setdefault(layer(name), set()).add(name.rsplit(".", 1)[-1])
    assert {"timing", "isolation", "stats", "blocks", "diagnostics"} <= layers["harness"]
    omni = {"checkpoint", "synthetic", "scenarios", "targets", "validation", "gitsource"}
    assert omni <= layers["omni"]
    report = {"results", "schema", "compat", "summary", "tables", "hostprose", "banner", "gate"}
    assert report | {"figuredata", "static", "interactive", "views"} <= layers["report"]
    # The top level holds the shared vocabulary, the run orchestration (runner, runhost,
    # spawn, measure, and the processes it starts: worker, counting), the simulated host
    # and the front end.
    assert len(layers["top"]) <= 16, sorted(layers["top"])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_harness_and_report_modules_follow_the_import_rule(name):
    assert violations(name, _imports_of(name)) == []


def test_nothing_the_report_side_reaches_imports_torch_or_the_domain():
    reached = report_side_closure()
    assert "embedbench.report.tables" in reached and "embedbench.harness.stats" in reached
    assert {f"{REGISTRY}.qwen3_omni", f"{REGISTRY}.spec"} <= reached
    offenders = {
        name: sorted(
            m
            for m in _imports_of(name)
            if _within(m, ("torch", OMNI, *RUN_SIDE)) and not in_registry(m)
        )
        for name in reached
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_rule_catches_what_it_forbids():
    """The checks above can fail: planted imports of each forbidden kind are reported."""
    planted = """
import torch
from embedbench.omni import scenarios
def late():
    from embedbench.runner import run
    from embedbench.report import tables
"""
    harness = imported_modules(planted, "embedbench.harness.timing")
    assert violations("embedbench.harness.timing", harness) == [
        "embedbench.harness.timing imports embedbench.omni.scenarios",
        "embedbench.harness.timing imports embedbench.report.tables",
        "embedbench.harness.timing imports embedbench.runner",
    ]
    report = imported_modules(planted, "embedbench.report.static")
    assert violations("embedbench.report.static", report) == [
        "embedbench.report.static imports embedbench.omni.scenarios",
        "embedbench.report.static imports embedbench.runner",
        "embedbench.report.static imports torch",
    ]
    assert violations("embedbench.omni.scenarios", report) == []  # the domain may use torch
    registry = imported_modules(
        "from embedbench.omni import families\n"
        "from embedbench.omni.families.replicas import qwen3_omni\n",
        "embedbench.report.tables",
    )
    assert violations("embedbench.report.tables", registry) == [
        "embedbench.report.tables imports embedbench.omni.families.replicas.qwen3_omni"
    ]


def test_relative_imports_resolve_inside_the_package():
    found = imported_modules("from .reference import x\nfrom . import y", "embedbench.omni.targets")
    assert found == {"embedbench.omni.targets.reference", "embedbench.omni.targets"}


# What a clone does not have: the project's SPEC/DESIGN documents and its issue tracker.
_UNCITABLE = re.compile(r"\b(SPEC|DESIGN)\b\s*§?|§\s*\d|\b[Ii]ssues? \d+\b")


def test_code_cites_its_own_docs_not_spec_design_or_issue_numbers():
    root = Path(__file__).resolve().parent.parent
    found = []
    for folder in ("embedbench", "benchmarks", "scripts", "tests"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".py", ".sh") or not path.is_file():
                continue
            if path.name in ("test_layout.py", "test_docs.py"):  # the rule and its examples
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _UNCITABLE.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert found == []


def test_the_citation_rule_catches_what_it_forbids():
    for text in ("(SPEC §3)", "DESIGN §1", "issue 14", "Issue 12:", "§4 of the spec"):
        assert _UNCITABLE.search(text), text
    for text in ("QUICK_DESIGN = [", "SMALL_DESIGN_DF", 'docs/PERFORMANCE.md, "CLI start-up"'):
        assert not _UNCITABLE.search(text), text


# ----------------------------------------------------------------- family names


def family_pattern() -> re.Pattern[str]:
    """Every registered family's name and model type, however spelt: ``Qwen3-Omni``,
    ``qwen3_omni_moe``, ``QWEN3_OMNI`` and ``Qwen3OmniMoe`` all match ``qwen3-omni``."""
    spellings = set()
    for family in families.all_families():
        for name in (family.name, family.label, family.model_type):
            chunks = [re.escape(c) for c in re.split(r"[-_. ]+", name.lower()) if c]
            spellings.add(r"[-_. ]?".join(chunks))
    return re.compile("|".join(sorted(spellings, key=len, reverse=True)), re.IGNORECASE)


def family_module(path: Path) -> bool:
    """A family's own module: ``omni/families/<family>.py`` or its replica module."""
    folder = PACKAGE / "omni" / "families"
    if path.name in ("__init__.py", "spec.py"):
        return False
    return path.parent in (folder, folder / "replicas")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def code_words(source: str) -> list[tuple[int, str]]:
    """(line, text) of every identifier and string literal of ``source`` but docstrings."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    words: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            words.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            words.append((node.lineno, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append((node.lineno, node.name))
        elif isinstance(node, ast.arg):
            words.append((node.lineno, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            words.append((node.value.lineno, node.arg))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [a.asname for a in node.names if a.asname]
            words += [(node.lineno, n) for n in [getattr(node, "module", None) or "", *names]]
    return words


def family_names_in(path: Path, pattern: re.Pattern[str]) -> list[str]:
    """``path:line: text`` of each family name in the code of ``path``."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        words = code_words(text)
    else:  # a shell script: every line but comments
        words = [(n, line) for n, line in enumerate(text.splitlines(), 1)]
        words = [(n, line) for n, line in words if not line.lstrip().startswith("#")]
    where = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
    return [f"{where}:{n}: {w!r}" for n, w in words if pattern.search(w)]


def test_family_names_appear_only_in_family_modules():
    pattern = family_pattern()
    root = PACKAGE.parent
    paths = [
        *sorted(PACKAGE.rglob("*.py")),
        *sorted((root / "benchmarks").rglob("*.py")),
        *sorted((root / "benchmarks").rglob("*.sh")),
    ]
    found = [hit for p in paths if not family_module(p) for hit in family_names_in(p, pattern)]
    assert found == []
    # Each family module does name its family (the rule looks where it should).
    for family in families.all_families():
        module = PACKAGE / "omni" / "families" / f"{family.replica.rsplit('.', 1)[-1]}.py"
        assert family_module(module) and family_names_in(module, pattern)


def test_the_family_name_rule_catches_what_it_forbids(tmp_path):
    pattern = family_pattern()
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""A docstring may say Qwen3-Omni."""\n'
        "# so may a comment: qwen2.5-omni\n"
        "QWEN3_OMNI = 1\n"
        "x = {'model_type': 'qwen2_5_omni'}\n"
        "def f(family='Qwen3-Omni'): return Qwen2_5OmniModel\n"
    )
    hits = [h.split(": ", 1)[1] for h in family_names_in(planted, pattern)]
    assert hits == ["'QWEN3_OMNI'", "'qwen2_5_omni'", "'Qwen3-Omni'", "'Qwen2_5OmniModel'"]
    assert not family_module(PACKAGE / "omni" / "families" / "spec.py")
    assert family_module(PACKAGE / "omni" / "families" / "replicas" / "qwen3_omni.py")


# Every public module says what it offers in ``__all__``, and every name there exists.
# Exempt until the changes that restructure them land; narrow this as they do.
ALL_EXEMPT: tuple[str, ...] = ()


def public_modules() -> list[str]:
    """The package's modules whose name has no part starting with ``_`` (a package's
    ``__init__`` counts as the package)."""
    return [n for n in MODULES if not any(p.startswith("_") for p in n.split("."))]


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:  # assignments and imports, also under if/try at top level (TYPE_CHECKING)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
                elif isinstance(sub, ast.Import | ast.ImportFrom):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return names


def all_problems(source: str) -> list[str]:
    """What is wrong with a module's ``__all__``: missing, not a literal list of names,
    a name twice, or a name the module does not define or import."""
    tree = ast.parse(source)
    found = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    if not found:
        return ["no __all__"]
    value = found[-1]
    if not isinstance(value, ast.List | ast.Tuple) or not all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return ["__all__ is not a literal list of names"]
    names = [e.value for e in value.elts]
    defined = _top_level_names(tree)
    problems = [f"{n} twice in __all__" for n in sorted({n for n in names if names.count(n) > 1})]
    return problems + [f"{n} is in __all__ but not defined" for n in names if n not in defined]


def test_the_all_exemptions_name_real_modules():
    for prefix in ALL_EXEMPT:
        assert prefix in MODULES, prefix


@pytest.mark.parametrize(
    "name", [n for n in public_modules() if not _within(n, ALL_EXEMPT)] or ["(none)"]
)
def test_every_public_module_defines_all_and_every_name_in_it_exists(name):
    assert all_problems(MODULES[name].read_text(encoding="utf-8")) == []


def test_the_all_rule_catches_what_it_forbids():
    assert all_problems("def f(): pass\n") == ["no __all__"]
    assert all_problems("__all__ = names()\n") == ["__all__ is not a literal list of names"]
    assert all_problems("import os\nX = 1\n__all__ = ['X', 'os', 'gone', 'X']\n") == [
        "X twice in __all__",
        "gone is in __all__ but not defined",
    ]
    assert all_problems("try:\n    Y = 1\nexcept E:\n    pass\n__all__ = ['Y']\n") == []
    lazy = "if TYPE_CHECKING:\n    from m import Z\n__all__ = ['Z']\n"  # as embedbench/__init__
    assert all_problems(lazy) == []
    assert "embedbench.__main__" not in public_modules()
    assert "embedbench.harness" in public_modules()


def test_the_package_and_cli_docstrings_name_what_they_offer():
    import argparse

    import embedbench
    from embedbench import cli

    assert [n for n in embedbench.__all__ if f"``{n}``" not in embedbench.__doc__] == []
    actions = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = {name for action in actions for name in action.choices}
    assert "probe" in commands
    assert [c for c in sorted(commands) if c not in cli.__doc__] == []
