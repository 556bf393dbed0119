"""docs/cli.md is generated from the argparse parsers, documents every option, and a
stale copy fails (scripts/build_cli_docs.py --check, as for the notebooks)."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from embedbench.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_cli_docs.py"
PAGE = ROOT / "docs" / "cli.md"


def _script():
    spec = importlib.util.spec_from_file_location("build_cli_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_the_committed_cli_page_matches_the_parsers():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_stale_page_fails_the_check_and_names_the_fix(tmp_path, capsys):
    script = _script()
    stale = tmp_path / "cli.md"
    stale.write_text(PAGE.read_text().replace("--max-slowdown", "--max-slow"))
    assert script.main(["--check"], page=stale) == 1
    assert "run python scripts/build_cli_docs.py" in capsys.readouterr().out
    assert script.main([], page=stale) == 0  # rebuilt
    assert script.main(["--check"], page=stale) == 0
    assert stale.read_text() == PAGE.read_text()


def test_the_page_has_a_section_and_a_row_for_every_subcommand_and_option():
    page = PAGE.read_text()
    sections = re.findall(r"^## embedbench (\S+)$", page, re.M)
    subparsers = _subparsers()
    assert sections == list(subparsers)
    for name, parser in subparsers.items():
        body = page.split(f"## embedbench {name}\n", 1)[1].split("\n## ", 1)[0]
        rows = set(re.findall(r"^\| `([^`]+)` \|", body, re.M))
        expected = {
            ", ".join(a.option_strings) or a.dest
            for a in parser._actions
            if not isinstance(a, argparse._HelpAction)
        }
        assert rows == expected, name
        for action in parser._actions:
            if action.help and action.option_strings and "--help" not in action.option_strings:
                assert " ".join(action.help.split()) in body, (name, action.dest)
