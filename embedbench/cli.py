"""Command line: ``embedbench run | report | validate | gate | selftest | probe |
synth-checkpoint`` (docs/cli.md has every option).

Bad input ends with one line on stderr and exit code 2; a completed run with a
failed validation, or a results dir that fails the gate (on time, or with ``--on work``
on the counted work per call), exits 1; an interrupted run exits 130.

Only what the argument table needs is imported at start-up (no torch, pandas or scipy):
each subcommand imports its own modules, so ``--help`` and a usage error answer at once
and ``report``, ``validate`` and ``gate`` run where torch is not installed.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from embedbench.config import ENTRY_CLI, RunConfig, cli_flag, entry_point, parse_float, parse_int
from embedbench.errors import ConfigError, EmbedbenchError
from embedbench.omni import families
from embedbench.report.markdown import frame_markdown

if TYPE_CHECKING:
    from embedbench.report.results import RunResult

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "GATE_ON",
    "build_parser",
    "config_from_args",
    "main",
    "print_report",
    "unrecognized",
]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# What ``embedbench gate --on`` gates: the intervals of host latency, or the counted work.
GATE_ON = ("time", "work")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit 2; an unknown option is
    reported by the subcommand it was given to, with the closest option it has."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._subcommand(getattr(parsed, "command", None))
            parser.error(unrecognized(extras, _long_options(parser)))
        return parsed

    def _subcommand(self, command: str | None) -> argparse.ArgumentParser:
        """The parser of ``command`` (this one when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                return action.choices[command]
        return self


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for a in parser._actions for flag in a.option_strings if flag.startswith("--")]


def unrecognized(extras: Sequence[str], options: Sequence[str]) -> str:
    """argparse's complaint about ``extras``, with the closest of ``options`` for each
    unknown option that has one: ``--iters`` -> ``did you mean --iterations?``."""
    guesses = []
    for extra in extras:
        flag = extra.split("=", 1)[0]
        if flag.startswith("--"):
            close = difflib.get_close_matches(flag, options, n=1)
            guesses += [(flag, close[0])] if close else []
    message = f"unrecognized arguments: {' '.join(extras)}"
    if len(guesses) == 1:
        return f"{message}; did you mean {guesses[0][1]}?"
    if guesses:
        return f"{message}; did you mean {', '.join(f'{g} for {f}' for f, g in guesses)}?"
    return message


def _add_run_parser(sub: argparse._SubParsersAction) -> None:
    """One option per RunConfig field, spelled and documented by the field (config.py)."""
    p = sub.add_parser("run", help="measure baseline vs fixed embed_input_ids")
    for param in fields(RunConfig):
        help_ = param.metadata["help"]
        if param.default is not None and param.default is not False:
            shown = param.default
            shown = " ".join(map(str, shown)) if isinstance(shown, tuple) else shown
            help_ += f" (default: {shown})"
        options: dict[str, Any] = {"dest": param.name, "default": param.default, "help": help_}
        if param.type == "bool":
            options["action"] = "store_true"
        elif param.type.startswith("tuple["):
            options["nargs"] = "+"
        if "metavar" in param.metadata:
            options["metavar"] = param.metadata["metavar"]
        p.add_argument(cli_flag(param), **options)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_family(parser: argparse.ArgumentParser, what: str) -> None:
    """``--family`` of a subcommand that needs one family (no ``auto``: no checkpoint)."""
    default = families.default().name
    parser.add_argument(
        "--family",
        default=default,
        metavar="{" + ",".join(families.names()) + "}",
        help=f"{what} (default {default})",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``embedbench`` argument parser."""
    parser = _Parser(prog="embedbench", formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run_parser(sub)
    rep = sub.add_parser("report", help="print the PR-format table of a results dir")
    rep.add_argument("results_dir")
    rep.add_argument("--html", metavar="OUT.html", help="also write a self-contained HTML report")
    rep.add_argument(
        "--pr-comment",
        metavar="OUT.md",
        help="also write a GitHub PR comment: OUT.md, its key figures as OUT-*.png beside "
        "it and OUT.zip (the results, the executed notebook and HTML where found)",
    )
    rep.add_argument(
        "--overwrite", action="store_true", help="replace an existing --pr-comment's files"
    )
    val = sub.add_parser("validate", help="check a results dir against the output schema")
    val.add_argument("results_dir")
    gate = sub.add_parser(
        "gate",
        help="exit 1 when a case is slower beyond --max-slowdown, or with --on work does "
        "more counted work (a CI regression gate)",
        description="On time (the default): exit 1 when any case's interval of the "
        "reduction lies entirely below -PCT (slower beyond the allowance), or when a case "
        "cannot be certified: not measured, failed validation (valid: false, verdict: "
        "invalid) or no interval. Reads the original PR script's output too (intervals "
        "recomputed from the raw records). With --on work: exit 1 when, for any case, a "
        "counted quantity of the fixed form's per-call ledger (work.json: operators in all "
        "and each one, bytes read, written and allocated, syncs, kernels and, from a run "
        "with --counts, instructions, which are allowed 0.1 % at least) exceeds the "
        "baseline form's by more than --max-increase PCT, or when a case has no ledger or "
        "its workers counted differently; the counts are exact, so this gate cannot flake. "
        "Prints one line per failing case; exit 0 with one summary line otherwise; exit 2 "
        "on bad input (missing dir, bad files, no work.json with --on work, a PCT that is "
        "not a number >= 0, an allowance of the other gate).",
    )
    gate.add_argument("results_dir")
    gate.add_argument(
        "--on",
        choices=GATE_ON,
        default=GATE_ON[0],
        help="what to gate: the intervals of host latency (time) or the counted work per "
        "call (work) (default time)",
    )
    gate.add_argument(
        "--max-slowdown",
        metavar="PCT",
        help="on time: allowed slowdown in percent, a number >= 0 (default 0)",
    )
    gate.add_argument(
        "--max-increase",
        metavar="PCT",
        help="on work: allowed increase of any counted quantity in percent, a number >= 0 "
        "(default 0: none)",
    )
    st = sub.add_parser(
        "selftest", help="recover known differences: spin, real work, off-CPU wait (harness check)"
    )
    st.add_argument("--delay-us", default="20", help="injected busy-wait in µs (default 20)")
    st.add_argument(
        "--base-us", default="1000", help="the spin carrier's length in µs (real work: half)"
    )
    st.add_argument("--blocks", default="20", help="paired blocks")
    st.add_argument("--iterations", default="20", help="calls per variant per block")
    st.add_argument("--cpu-core", help="core to pin (default: lowest allowed core)")
    st.add_argument("--allow-busy", action="store_true", help="run even on a busy core")
    st.add_argument("--json", metavar="OUT.json", help="also write the result as JSON")
    probe = sub.add_parser(
        "probe",
        help="check placements, lookups and device syncs on a device, no checkpoint (~15 s)",
        description="Builds a seeded table of the family's published geometry on the "
        "device and checks, for every case: int32 token ids and multimodal rows on the "
        "device, the bool mask on the CPU, the expected lookup counts, torch.equal of the "
        "two forms; and counts the syncs torch reports inside one call of each (a lower "
        "bound: a driver-side wait is not reported; CUDA only). "
        "Exit 0 when every case passes, 1 otherwise, 2 on bad input.",
    )
    _add_family(probe, "whose geometry, token ids and wrapper forms")
    probe.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    probe.add_argument("--tokens", default="1172", help="input length (default 1172)")
    probe.add_argument("--hidden", help="hidden size (default: the published model's)")
    probe.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    labels = " or ".join(f.label for f in families.all_families())
    syn = sub.add_parser("synth-checkpoint", help=f"write a synthetic {labels} checkpoint")
    syn.add_argument("directory")
    sizes = ", ".join(f"{f.hidden_size} for {f.model_label}" for f in families.all_families())
    syn.add_argument("--hidden", help=f"hidden size (default: the published model's, {sizes})")
    _add_family(syn, "whose config layout, token ids and vocab")
    syn.add_argument("--seed", default="7451", help="seed of the embedding values")
    parser.description, parser.epilog = _top_level_help(list(sub.choices))
    return parser


def _top_level_help(commands: list[str]) -> tuple[str, str]:
    """Plain-text description (every subcommand, by name) and epilog (the exit codes),
    wrapped without breaking a command name at its hyphen."""
    names = f"{', '.join(commands[:-1])} and {commands[-1]}"
    default = families.default()
    description = (
        f"Paired host-latency microbenchmark and report kit for vLLM-Omni PR {default.pr} "
        f"({default.label} embed_input_ids). Commands: {names}; "
        "embedbench COMMAND --help describes each."
    )
    epilog = (
        "Exit codes: 0 done; 1 a failed validation, gate or self-test; 2 bad input or a "
        "refused run (one line on stderr); 130 interrupted."
    )
    fill = textwrap.TextWrapper(width=79, break_on_hyphens=False)
    return fill.fill(description), fill.fill(epilog)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig for ``embedbench run`` arguments."""
    return RunConfig(**{param.name: getattr(args, param.name) for param in fields(RunConfig)})


def _import_jsonschema() -> None:
    """Import jsonschema without its optional ``iri`` format checker.

    jsonschema registers that checker at import when ``rfc3987_syntax`` is installed (a
    dependency of jupyter's, so there with embedbench[notebook]), and importing it builds
    a grammar: about 2 s of the ~3 s a ``report`` took. embedbench validates without
    format checking, so the CLI imports jsonschema with that module hidden; the only
    effect, in this process, is that jsonschema's FormatChecker does not check ``iri``.
    A no-op when jsonschema is already imported (a caller's process, a test).
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        import jsonschema  # noqa: F401
    except ImportError:  # not installed: readers skip the check, validate says how to get it
        pass
    finally:
        del sys.modules["rfc3987_syntax"]


def _note_unchecked() -> None:
    """One line on stderr when results are read without their schema check."""
    from embedbench.report import schema

    if not schema.available():
        print(
            "embedbench: note: jsonschema is not installed, so the results were read "
            f"without their schema check ({schema.INSTALL_JSONSCHEMA})",
            file=sys.stderr,
        )


def print_report(result: RunResult) -> None:
    """The PR table, then the statistics table, on stdout."""
    from embedbench.report.banner import status_lines
    from embedbench.report.hostprose import busy_label
    from embedbench.report.tables import pr_table, statistics_table, to_pr_markdown

    print(to_pr_markdown(pr_table(result)))
    for line in status_lines(result):
        print(f"\n> {line}")
    if busy_label(result):
        print(f"\n> {busy_label(result)}")
    print()
    print(frame_markdown(statistics_table(result)))
    _print_work(result)
    failed = [r for r in result.validation if not r.get("ok")]
    for row in failed:
        print(f"VALIDATION FAILED: {row['case']} @ {row['tokens']} tokens: {row.get('mismatch')}")


def _print_work(result: RunResult) -> None:
    """The work-per-call table and its sentence, for a run that recorded a ledger."""
    from embedbench.report.tables import to_pr_markdown
    from embedbench.report.work import work_sentence, work_table

    sentence = work_sentence(result)
    if sentence is None:
        return
    print("\nWork per call (counted, not timed):\n")
    print(to_pr_markdown(work_table(result)))
    print(f"\n> {sentence}")


def _cmd_run(args: argparse.Namespace) -> int:
    config = config_from_args(args)  # a bad argument is refused before torch is imported
    from embedbench.runner import run

    with entry_point(ENTRY_CLI):  # recorded, so the PR comment reproduces it as a CLI run
        result = run(config, progress=not args.no_progress)
    print_report(result)
    print(f"\nresults: {result.directory}")
    return EXIT_OK if result.all_valid else EXIT_INVALID


def _cmd_report(args: argparse.Namespace) -> int:
    _import_jsonschema()
    from embedbench.report.results import load_results

    result = load_results(args.results_dir)
    _note_unchecked()
    if args.pr_comment:  # refused before anything is printed or written
        from embedbench.report import prcomment

        prcomment.check_destination(args.pr_comment, overwrite=args.overwrite)
    print_report(result)
    written = []
    if args.html:
        from embedbench.report.html import write_html

        written.append(write_html(result, args.html))
        print(f"\nhtml: {written[-1]}")
    if args.pr_comment:
        comment = prcomment.write_pr_comment(
            result, args.pr_comment, overwrite=args.overwrite, extra=written
        )
        print(f"\npr comment: {comment.markdown}")
        for path in comment.figures:
            print(f"  figure: {path}")
        print(f"  zip: {comment.archive} ({len(comment.archived)} files)")
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    _import_jsonschema()
    from embedbench.report.results import inspect_results_dir

    print(f"ok: {args.results_dir} ({inspect_results_dir(args.results_dir).describe()})")
    return EXIT_OK


def _cmd_gate(args: argparse.Namespace) -> int:
    if args.on == "work":
        return _gate_work(args)
    if args.max_increase is not None:
        raise ConfigError(
            "--max-increase is the allowance of the gate on counted work; add --on work, "
            "or pass --max-slowdown to gate on time"
        )
    _import_jsonschema()
    from embedbench.report.gate import check_max_slowdown, gate_lines, gate_results
    from embedbench.report.results import load_results

    given = "0" if args.max_slowdown is None else args.max_slowdown
    max_slowdown = check_max_slowdown(given, "--max-slowdown")
    outcome = gate_results(load_results(args.results_dir), max_slowdown)
    _note_unchecked()
    print("\n".join(gate_lines(outcome)))
    return EXIT_OK if outcome.passed else EXIT_INVALID


def _gate_work(args: argparse.Namespace) -> int:
    """``gate --on work``: the counted work per call of each case (report/workgate.py)."""
    if args.max_slowdown is not None:
        raise ConfigError(
            "--max-slowdown is the allowance of the gate on time; with --on work pass "
            "--max-increase"
        )
    from embedbench.report.workgate import check_max_increase, gate_work, work_gate_lines

    given = "0" if args.max_increase is None else args.max_increase
    max_increase = check_max_increase(given, "--max-increase")
    _import_jsonschema()
    from embedbench.report.results import load_results

    outcome = gate_work(load_results(args.results_dir), max_increase)
    _note_unchecked()
    print("\n".join(work_gate_lines(outcome)))
    return EXIT_OK if outcome.passed else EXIT_INVALID


def _cmd_selftest(args: argparse.Namespace) -> int:
    checked = RunConfig(
        blocks=args.blocks, iterations=args.iterations, cpu_core=args.cpu_core, processes=1
    )
    delay = parse_float("--delay-us", args.delay_us, minimum=0.01)
    base = parse_float("--base-us", args.base_us, minimum=0.01)
    from embedbench.report.results import write_json_atomic
    from embedbench.selftest import run_selftest

    result = run_selftest(
        delay,
        base_us=base,
        blocks=checked.blocks,
        iterations=checked.iterations,
        cpu_core=checked.cpu_core,
        allow_busy=args.allow_busy,
    )
    print("\n".join(result.lines()))
    if args.json:
        write_json_atomic(Path(args.json), result.to_json())
    return EXIT_OK if result.passed else EXIT_INVALID


def _cmd_probe(args: argparse.Namespace) -> int:
    family = RunConfig._coerce_choice("--family", args.family, families.names())
    checked = RunConfig(device=args.device, lengths=args.tokens)
    hidden = None if args.hidden is None else parse_int("--hidden", args.hidden, minimum=1)
    from embedbench.probe import run_probe
    from embedbench.report.results import write_json_atomic

    report = run_probe(
        family=family, device=checked.device, tokens=checked.lengths[0], hidden=hidden
    )
    print(
        f"probe: {family}, {report.device}, {report.tokens} tokens, hidden {report.hidden}, "
        f"{'all cases ok' if report.ok else 'FAILED'}"
    )
    print(report.table())
    if args.json:
        write_json_atomic(Path(args.json), report.to_json())
    return EXIT_OK if report.ok else EXIT_INVALID


def _cmd_synth(args: argparse.Namespace) -> int:
    hidden_size = None if args.hidden is None else parse_int("--hidden", args.hidden, minimum=1)
    seed = parse_int("--seed", args.seed)
    family = RunConfig._coerce_choice("--family", args.family, families.names())
    from embedbench.omni import synthetic

    path = synthetic.write_synthetic_checkpoint(
        args.directory,
        hidden_size=hidden_size,
        seed=seed,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
        family=family,
    )
    print(path)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed on one line
        return int(exc.code or 0)
    commands = {
        "run": _cmd_run,
        "report": _cmd_report,
        "validate": _cmd_validate,
        "gate": _cmd_gate,
        "selftest": _cmd_selftest,
        "synth-checkpoint": _cmd_synth,
        "probe": _cmd_probe,
    }
    try:
        problem = families.environment_problem()
        if problem:
            raise ConfigError(problem)
        return commands[args.command](args)
    except EmbedbenchError as exc:
        print(f"embedbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"embedbench: {exc or 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED


def console_main() -> None:
    """The ``embedbench`` command and ``python -m embedbench``: run ``main`` and end the
    process at once with its code (embedbench/harness/exiting.py says why)."""
    from embedbench.harness.exiting import exit_now

    exit_now(main())


if __name__ == "__main__":
    console_main()
