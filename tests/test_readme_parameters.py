"""The README lists every run parameter: the CLI synopsis and the notebook parameters."""

import dataclasses
import re
from pathlib import Path

from embedbench.cli import build_parser
from embedbench.config import CompareConfig, ReportConfig, RunConfig, cli_flag

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _between(start: str, end: str) -> str:
    begin = README.index(start)
    return README[begin : README.index(end, begin)]


def _run_options() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {flag for a in sub.choices["run"]._actions for flag in a.option_strings}


def test_the_commands_synopsis_lists_every_run_flag_and_no_other():
    synopsis = _between("embedbench run [", "embedbench report DIR")
    listed = set(re.findall(r"\[(--[a-z-]+)", synopsis))
    flags = {cli_flag(f) for f in dataclasses.fields(RunConfig)} | {"--no-progress"}
    assert listed == flags
    assert flags <= _run_options()


def test_the_notebooks_section_names_every_notebook_parameter():
    section = _between("## The three notebooks", "**Run**")
    named = set(re.findall(r"`([a-z_]+)`", section))
    for config_class in (RunConfig, ReportConfig, CompareConfig):
        missing = [f.name for f in dataclasses.fields(config_class) if f.name not in named]
        assert not missing, f"README's notebook section lacks {missing}"
