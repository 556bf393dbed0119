"""The command line end to end on a small geometry, and its bad-input refusals."""

import json
import subprocess
import sys

import pytest
from helpers import QUICK

from embedbench import checkpoint
from embedbench.cli import build_parser, config_from_args, main
from embedbench.results import RESULT_FILES, load_results
from embedbench.scenarios import CASE_LABELS, CASES
from embedbench.validation import EXPECTED_LOOKUPS

REFERENCE_EMBEDDING = "embedbench.targets.reference.ReferenceVocabEmbedding"
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
    lines = proc.stdout.splitlines()
    header = lines.index(PR_HEADER)
    assert lines[header + 1] == "| --- | ---: | ---: | ---: |"
    rows = lines[header + 2 : header + 2 + len(CASES)]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == [CASE_LABELS[c] for c in CASES]
    assert sorted(p.name for p in out.iterdir()) == sorted(RESULT_FILES)

    result = load_results(out)
    assert result.status == "complete"
    assert result.metadata["synthetic"] is True
    assert result.metadata["metric_order"] == [
        "host_observed_us",
        "calling_thread_cpu_us",
        "synchronized_completion_us",
    ]
    assert result.metadata["embedding"]["shape"] == [152064, 32]
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
    assert info["lm_shim"] == "production" and info["embedding_class"] == REFERENCE_EMBEDDING
    assert info["language_model"].startswith(
        "ReferenceLanguageModel.embed_input_ids -> ReferenceTextModel.embed_input_ids ->"
    )
    assert [row["calls"] for row in result.validation] == [{"baseline": 2, "fixed": 1}]


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
    assert len(result["checks"]) == 5 and len(proc.stdout.strip().splitlines()) == 6
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
