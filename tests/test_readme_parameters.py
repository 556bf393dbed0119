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


def _options(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {flag for a in sub.choices[command]._actions for flag in a.option_strings}


def test_the_commands_synopsis_lists_every_run_flag_and_no_other():
    synopsis = _between("embedbench run [", "embedbench report RESULTS_DIR")
    listed = set(re.findall(r"\[(--[a-z-]+)", synopsis))
    flags = {cli_flag(f) for f in dataclasses.fields(RunConfig)} | {"--no-progress"}
    assert listed == flags
    assert flags <= _options("run")


def test_the_notebooks_section_names_every_notebook_parameter():
    section = _between("## The three notebooks", "**Run**")
    named = set(re.findall(r"`([a-z_]+)`", section))
    for config_class in (RunConfig, ReportConfig, CompareConfig):
        missing = [f.name for f in dataclasses.fields(config_class) if f.name not in named]
        assert not missing, f"usage.md's notebook section lacks {missing}"


# How a fenced line calls embedbench: the entry point, or a Python's ``-m embedbench``.
_PROGRAM = re.compile(r"^(?:embedbench|\S*python\S*\s+-m\s+embedbench|\$PY\s+-m\s+embedbench)\s")


def _fenced_commands() -> list[tuple[str, list[str]]]:
    """Every ``embedbench ...`` command in a fenced block of README.md or docs/ (lines
    joined at a trailing backslash, split at ``&&``), as the page's name and the
    arguments after the program, but not the synopses (``[--flag ...]``)."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"^ *```[^\n]*\n(.*?)^ *```", path.read_text(), re.M | re.S)
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                for command in line.split("#")[0].split("&&"):
                    command = command.strip()
                    match = _PROGRAM.match(command + " ")
                    if match and "[" not in command:
                        found.append((path.name, shlex.split(command[match.end() :])))
    return found


def test_every_fenced_embedbench_command_parses_as_written():
    """A dry parse by the real parser (nothing runs); a run's arguments also make a
    RunConfig, whose refusals (ConfigError) are what a user would hit first."""
    commands = _fenced_commands()
    subcommands = {argv[0] for _, argv in commands}
    assert subcommands >= {"run", "report", "validate", "gate", "synth-checkpoint"}
    runs = [(name, argv) for name, argv in commands if argv[0] == "run"]
    assert len(runs) >= 5  # the quick start's, the GPU box's, vllm-omni's, Qwen3-Omni's, CI's
    for name, argv in commands:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as refused:
            raise AssertionError(f"{name}: embedbench {shlex.join(argv)} is refused") from refused
        spelled = {word.split("=")[0] for word in argv if word.startswith("--")}
        unknown = spelled - _options(argv[0])  # argparse takes a prefix: the docs may not
        assert not unknown, (name, argv, unknown)
        if argv[0] == "run":
            config = config_from_args(args)
            assert config.blocks // 2 >= config.processes, (name, argv)


def test_the_dry_parse_refuses_a_misspelt_option(capsys):
    try:
        build_parser().parse_args(["gate", "DIR", "--max-slowdwn", "2"])
    except SystemExit as refused:
        assert refused.code == 2
    else:
        raise AssertionError("--max-slowdwn was accepted")
    assert "did you mean --max-slowdown?" in capsys.readouterr().err
    assert _PROGRAM.match("$PY -m embedbench run ") and _PROGRAM.match("python -m embedbench x ")
