"""docs/usage.md lists every run parameter: the CLI synopsis and the notebook parameters."""

import dataclasses
import re
import shlex
from pathlib import Path

from embedbench.cli import build_parser, config_from_args
from embedbench.config import CompareConfig, ReportConfig, RunConfig, cli_flag

ROOT = Path(__file__).resolve().parents[1]
USAGE = (ROOT / "docs" / "usage.md").read_text()


def _between(start: str, end: str) -> str:
    begin = USAGE.index(start)
    return USAGE[begin : USAGE.index(end, begin)]


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
        assert not missing, f"usage.md's notebook section lacks {missing}"


def _fenced_run_examples() -> list[tuple[str, str]]:
    """Every ``embedbench run`` command in a fenced block of README.md or docs/ (lines
    joined at a trailing backslash, split at ``&&``), but not the synopsis."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(), re.M | re.S)
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                for command in line.split("#")[0].split("&&"):
                    command = command.strip()
                    if command.startswith("embedbench run") and "[" not in command:
                        found.append((path.name, command))
    return found


def test_every_fenced_run_example_is_accepted_as_written():
    examples = _fenced_run_examples()
    assert len(examples) >= 5  # the quick start's, the GPU box's, vllm-omni's, Qwen3-Omni's, CI's
    for name, command in examples:
        args = build_parser().parse_args(shlex.split(command)[1:])
        config = config_from_args(args)  # RunConfig's refusals are ConfigError: none here
        assert config.blocks // 2 >= config.processes, (name, command)
