"""The command line end to end on a small geometry, and its bad-input refusals."""

import dataclasses
import json
import subprocess
import sys

import pytest
from helpers import QUICK

from embedbench.cli import build_parser, config_from_args, main
from embedbench.config import RunConfig
from embedbench.omni import checkpoint
from embedbench.omni.scenarios import CASE_LABELS, CASES
from embedbench.omni.validation import EXPECTED_LOOKUPS
from embedbench.report.results import RESULT_FILES, WORK, load_results

REFERENCE_EMBEDDING = "embedbench.omni.targets.reference.ReferenceVocabEmbedding"
PR_HEADER = "| Input | Before (μs) | After (μs) | Host latency reduction |"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "embedbench", *args], capture_output=True, text=True, timeout=300
    )


def test_run_end_to_end_writes_four_files_and_prints_the_pr_table(small_checkpoint, tmp_path):
    out = tmp_path / "out"
    proc = _run(
        "run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(out), "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    design = [line for line in proc.stderr.splitlines() if "degree(s) of freedom" in line]
    assert len(design) == 1 and design[0].startswith("3 worker processes give 2 degree(s)")
    assert "for --blocks 20 over 5 workers" in design[0]
    lines = proc.stdout.splitlines()
    header = lines.index(PR_HEADER)
    assert lines[header + 1] == "| --- | ---: | ---: | ---: |"
    rows = lines[header + 2 : header + 2 + len(CASES)]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == [CASE_LABELS[c] for c in CASES]
    assert sorted(p.name for p in out.iterdir()) == sorted([*RESULT_FILES, WORK])

    result = load_results(out)
    assert result.status == "complete"
    assert result.metadata["synthetic"] is True
    assert result.metadata["metric_order"] == [
        "host_observed_us",
        "calling_thread_cpu_us",
        "synchronized_completion_us",
    ]
    assert result.metadata["embedding_shape"] == [152064, 32]
    assert result.metadata["lm_shim"] == "flat" == result.metadata["config"]["lm_shim"]
    assert result.metadata["target_info"]["embedding_class"] == REFERENCE_EMBEDDING
    for row in result.validation:
        assert row["ok"] and row["torch_equal"]
        assert row["calls"] == EXPECTED_LOOKUPS[row["case"]]
    assert {r["case"] for r in result.validation} == set(CASES)
    for row in result.summary:
        assert row["valid"] and row["blocks"] == 6
        low, high = row["reduction_ci95_pct"]
        assert low <= row["reduction_pct"] <= high
    micro = [r for r in result.records if r["scope"] == "whole_wrapper"]
    timer = [r for r in result.records if r["case"] == "timer"]
    assert len(micro) == len(CASES) * 6 * 2
    assert len(timer) >= 10 and all(len(r["samples_us"]) >= 100 for r in timer)
    assert all(len(s) == 3 for r in micro for s in r["samples_us"])

    report = _run("report", str(out))
    assert report.returncode == 0
    assert "\n".join(lines[header : header + 2 + len(CASES)]) in report.stdout


def test_lm_shim_flag_reaches_the_config(capsys):
    parser = build_parser()
    assert config_from_args(parser.parse_args(["run"])).lm_shim == "flat"
    args = parser.parse_args(["run", "--lm-shim", "production"])
    assert config_from_args(args).lm_shim == "production"
    assert main(["run", "--help"]) == 0
    assert "--lm-shim {flat,production}" in capsys.readouterr().out


# The run flags as docs/cli.md names them: spelling and kind are part of the interface.
RUN_FLAGS = {
    "--model": "value",
    "--target": "value",
    "--repo": "value",
    "--baseline-ref": "value",
    "--candidate-ref": "value",
    "--cpu-core": "value",
    "--lengths": "values",
    "--cases": "values",
    "--warmup": "value",
    "--blocks": "value",
    "--iterations": "value",
    "--device": "value",
    "--seed": "value",
    "--output-dir": "value",
    "--overwrite": "switch",
    "--allow-busy": "switch",
    "--aa": "switch",
    "--counts": "switch",
    "--processes": "value",
    "--timing-window": "value",
    "--lm-shim": "value",
    "--family": "value",
    "--no-progress": "switch",
}


def _run_actions() -> dict:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    run = sub.choices["run"]
    return {a.option_strings[0]: a for a in run._actions if a.option_strings[0] != "-h"}


def test_run_flags_are_the_runconfig_fields_spelled_as_before():
    actions = _run_actions()
    kinds = {
        flag: "switch" if a.nargs == 0 else "values" if a.nargs == "+" else "value"
        for flag, a in actions.items()
    }
    assert kinds == RUN_FLAGS
    fields = [f.name for f in dataclasses.fields(RunConfig)]
    assert [a.dest for a in actions.values() if a.dest != "no_progress"] == fields
    assert actions["--aa"].dest == "aa_check"
    assert config_from_args(build_parser().parse_args(["run"])) == RunConfig()


def test_run_flags_reach_the_config():
    args = build_parser().parse_args(
        [
            *("run", "--model", "/m", "--target", "vllm-omni", "--repo", "/r"),
            *("--baseline-ref", "abc", "--candidate-ref", "HEAD", "--cpu-core", "1"),
            *("--lengths", "512", "1172", "--cases", "audio", "text", "--warmup", "3"),
            *("--blocks", "8", "--iterations", "4", "--device", "cpu", "--seed", "9"),
            *("--output-dir", "/o", "--overwrite", "--allow-busy", "--aa", "--counts"),
            *("--processes", "2", "--timing-window", "tight", "--lm-shim", "production"),
            *("--family", "qwen3-omni"),
        ]
    )
    assert config_from_args(args) == RunConfig(
        model="/m",
        target="vllm-omni",
        repo="/r",
        baseline_ref="abc",
        candidate_ref="HEAD",
        cpu_core=1,
        lengths=(512, 1172),
        cases=("audio", "text"),
        warmup=3,
        blocks=8,
        iterations=4,
        device="cpu",
        seed=9,
        output_dir="/o",
        overwrite=True,
        allow_busy=True,
        aa_check=True,
        counts=True,
        processes=2,
        timing_window="tight",
        lm_shim="production",
        family="qwen3-omni",
    )


@pytest.mark.parametrize(
    "argv, lengths, cases",
    [
        (["--lengths", "1172,4096"], (1172, 4096), CASES),
        (["--lengths", "[512, 1172]"], (512, 1172), CASES),
        (["--lengths", "512", "1172"], (512, 1172), CASES),
        (["--lengths", "512,", "1172"], (512, 1172), CASES),
        (["--cases", "Text"], (1172,), ("text",)),
        (["--cases", "text,AUDIO"], (1172,), ("text", "audio")),
        (["--cases", "Audio + image + video", "video"], (1172,), ("mixed", "video")),
    ],
)
def test_lengths_take_commas_and_cases_take_any_letter_case_and_labels(argv, lengths, cases):
    config = config_from_args(build_parser().parse_args(["run", *argv]))
    assert (config.lengths, config.cases) == (lengths, cases)


def test_a_bad_case_is_one_line_and_exit_2(capsys):
    assert main(["run", "--cases", "smell", "--output-dir", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "embedbench: error: unknown case 'smell'; choose from "
        "text, audio, image, video, mixed, interleaved\n"
    )


def test_run_with_the_production_shim_records_it(small_checkpoint, tmp_path):
    out = tmp_path / "out"
    proc = _run(
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK,
        *("--cases", "audio", "--processes", "1", "--lm-shim", "production"),
        *("--output-dir", str(out), "--no-progress"),
    )
    assert proc.returncode == 0, proc.stderr
    result = load_results(out)
    assert result.metadata["lm_shim"] == "production" == result.metadata["config"]["lm_shim"]
    info = result.metadata["target_info"]
    assert "lm_shim" not in info and info["embedding_class"] == REFERENCE_EMBEDDING
    assert info["language_model"].startswith(
        "ReferenceLanguageModel.embed_input_ids -> ReferenceTextModel.embed_input_ids ->"
    )
    assert [row["calls"] for row in result.validation] == [{"baseline": 2, "fixed": 1}]


def test_run_a_qwen3_omni_checkpoint_end_to_end(tmp_path):
    """The family from config.json (docs/families.md), the Qwen3-Omni replica, its expected counts
    (interleaved keeps one lookup) and the DeepStack buffer compared."""
    model = tmp_path / "q3"
    synth = _run("synth-checkpoint", str(model), "--family", "qwen3-omni", "--hidden", "16")
    assert synth.returncode == 0, synth.stderr
    out = tmp_path / "out"
    proc = _run(
        *("run", "--model", str(model), *QUICK, "--cases", "image", "interleaved"),
        *("--processes", "1", "--output-dir", str(out), "--no-progress"),
    )
    assert proc.returncode == 0, proc.stderr
    result = load_results(out)
    assert result.metadata["family"] == "qwen3-omni"
    assert result.metadata["family_source"] == "model_type"
    assert result.metadata["config"]["family"] == "auto"
    assert "Qwen3OmniMoeThinker" in result.metadata["target_info"]["replica_of"]
    calls = {row["case"]: row["calls"] for row in result.validation}
    assert calls == {
        "image": {"baseline": 2, "fixed": 1},
        "interleaved": {"baseline": 1, "fixed": 1},
    }
    for row in result.validation:
        assert row["ok"] and row["deepstack_equal"] is True
        assert row["compared"] == ["output", "deepstack_buffer"]
    assert all(row["valid"] for row in result.summary)


def test_synth_checkpoint_command(tmp_path):
    target = tmp_path / "ck"
    proc = _run("synth-checkpoint", str(target), "--hidden", "8")
    assert proc.returncode == 0, proc.stderr
    facts = checkpoint.read_thinker_facts(target)
    assert (facts.vocab_size, facts.hidden_size) == (152064, 8)


def test_selftest_command_prints_a_line_and_writes_json(tmp_path):
    out = tmp_path / "selftest.json"
    proc = _run(
        "selftest",
        "--delay-us",
        "50",
        "--base-us",
        "500",
        "--blocks",
        "8",
        "--iterations",
        "8",
        "--json",
        str(out),
        "--allow-busy",
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout.startswith("self-test PASSED") or proc.stdout.startswith("self-test FAILED")
    result = json.loads(out.read_text())
    assert result["design"]["delay_us"] == 50.0 and result["design"]["blocks"] == 8
    lines = proc.stdout.strip().splitlines()
    assert len(result["checks"]) == 5 and len(lines) == 7
    assert lines[-1].startswith(("  host stable: ", "  host noisy: "))  # the canary's reading
    assert result["host_stability"]["verdict"] in ("stable", "noisy")
    assert (proc.returncode == 0) == result["passed"]


@pytest.mark.unit
def test_top_level_help_is_plain_text_and_names_every_subcommand(capsys):
    parser = build_parser()
    commands = list(parser._subparsers._group_actions[0].choices)
    assert {"run", "report", "validate", "gate", "selftest", "synth-checkpoint"} <= set(commands)
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    description = out[out.index("\n\n") : out.index("positional arguments")]
    assert "``" not in out and "`" not in description
    words = description.replace(",", " ").replace(";", " ").split()
    assert all(command in words for command in commands), description  # unbroken names
    assert "Exit codes: 0" in out and "130 interrupted" in out


@pytest.mark.unit
def test_run_without_processes_takes_what_the_blocks_allow():
    config = config_from_args(build_parser().parse_args(["run", "--blocks", "6"]))
    assert (config.blocks, config.processes, config.processes_source) == (6, 3, "derived")
    argv = ["run", "--blocks", "6", "--processes", "2"]
    given = config_from_args(build_parser().parse_args(argv))
    assert (given.processes, given.processes_source) == (2, "given")


@pytest.mark.unit
def test_an_explicit_processes_the_blocks_cannot_hold_is_refused_as_before(capsys):
    assert main(["run", "--blocks", "6", "--processes", "5"]) == 2
    assert capsys.readouterr().err == (
        "embedbench: error: processes (5) must be at most blocks / 2 (3), so that every "
        "worker runs a block in each order; pass --processes 3 (notebook: processes=3) or "
        "--blocks 10\n"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "--iters", "5"], "--iters 5; did you mean --iterations?"),
        (["run", "--iters=5"], "--iters=5; did you mean --iterations?"),
        (["run", "--iters", "5", "--blok", "6"], "--iterations for --iters, --blocks for --blok?"),
        (["run", "--zzzzzz"], "unrecognized arguments: --zzzzzz"),
        (["selftest", "--delay", "5", "--iters", "3"], "did you mean --iterations?"),
    ],
)
def test_an_unknown_flag_names_its_subcommand_help_and_the_closest_flag(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    command = argv[0]
    assert err.startswith(f"embedbench {command}: error: unrecognized arguments: ")
    assert err.endswith(f" (see embedbench {command} --help)\n") and err.count("\n") == 1
    assert says in err


def test_a_run_without_processes_says_so_first_and_records_it(small_checkpoint, tmp_path):
    out = tmp_path / "out"
    proc = _run(
        *("run", "--model", str(small_checkpoint), "--lengths", "300", "--warmup", "2"),
        *("--blocks", "4", "--iterations", "3", "--cases", "text", "--allow-busy"),
        *("--output-dir", str(out), "--no-progress"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "2 worker processes, not 5: --blocks 4 allows at most 2, one block in each order per "
        "worker; --blocks 10 or more runs 5"
    )
    metadata = load_results(out).metadata
    assert (metadata["processes"], metadata["processes_source"]) == (2, "derived")
    assert metadata["blocks_source"] == "given" and len(metadata["workers"]) == 2
    assert _run("validate", str(out)).returncode == 0  # the schema takes the new fields
