"""The command line end to end on a small geometry, and its bad-input refusals."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from embedbench import checkpoint
from embedbench.cli import main
from embedbench.results import RESULT_FILES, load_results
from embedbench.scenarios import CASE_LABELS, CASES
from embedbench.validation import EXPECTED_LOOKUPS

PR_HEADER = "| Input | Before (μs) | After (μs) | Host latency reduction |"
QUICK = ["--lengths", "300", "--warmup", "2", "--blocks", "6", "--iterations", "3"]


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


def test_synth_checkpoint_command(tmp_path):
    target = tmp_path / "ck"
    proc = _run("synth-checkpoint", str(target), "--hidden", "8")
    assert proc.returncode == 0, proc.stderr
    facts = checkpoint.read_thinker_facts(target)
    assert (facts.vocab_size, facts.hidden_size) == (152064, 8)


def _copy_checkpoint(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _break_no_thinker(ck: Path) -> None:
    (ck / "config.json").write_text(json.dumps({"architectures": ["x"]}))


def _break_index_key(ck: Path) -> None:
    index = json.loads((ck / checkpoint.INDEX_NAME).read_text())
    del index["weight_map"][checkpoint.EMBEDDING_KEY]
    (ck / checkpoint.INDEX_NAME).write_text(json.dumps(index))


def _break_missing_shard(ck: Path) -> None:
    index = json.loads((ck / checkpoint.INDEX_NAME).read_text())
    (ck / index["weight_map"][checkpoint.EMBEDDING_KEY]).unlink()


def _break_shape(ck: Path) -> None:
    config = json.loads((ck / "config.json").read_text())
    config["thinker_config"]["text_config"]["hidden_size"] = 64
    (ck / "config.json").write_text(json.dumps(config))


def _break_dtype(ck: Path) -> None:
    index = json.loads((ck / checkpoint.INDEX_NAME).read_text())
    shard = ck / index["weight_map"][checkpoint.EMBEDDING_KEY]
    save_file({checkpoint.EMBEDDING_KEY: torch.zeros(152064, 32, dtype=torch.float16)}, shard)


CHECKPOINT_BREAKS = {
    "missing config.json": (lambda ck: (ck / "config.json").unlink(), "config.json"),
    "no thinker_config": (_break_no_thinker, "thinker_config"),
    "index without the embedding": (_break_index_key, checkpoint.EMBEDDING_KEY),
    "missing shard": (_break_missing_shard, "shard"),
    "wrong shape": (_break_shape, "shape"),
    "wrong dtype": (_break_dtype, "expected BF16"),
}


def _assert_refused(capsys, argv, fragment, out: Path) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("embedbench: error:") or err.startswith("embedbench run: error:")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment.lower() in err.lower(), err
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(CHECKPOINT_BREAKS))
def test_bad_checkpoint_is_refused_before_anything_is_written(
    name, small_checkpoint, tmp_path, capsys
):
    ck = _copy_checkpoint(small_checkpoint, tmp_path / "ck")
    breaker, fragment = CHECKPOINT_BREAKS[name]
    breaker(ck)
    out = tmp_path / "out"
    _assert_refused(
        capsys, ["run", "--model", str(ck), *QUICK, "--output-dir", str(out)], fragment, out
    )


BAD_FLAGS = {
    "missing model dir": (["--model", "/nonexistent/model"], "/nonexistent/model"),
    "core outside affinity": (["--cpu-core", "100000"], "affinity"),
    "length below 300": (["--lengths", "299"], ">= 300"),
    "blocks 0": (["--blocks", "0"], "blocks"),
    "iterations 0": (["--iterations", "0"], "iterations"),
    "negative warmup": (["--warmup", "-1"], "warmup"),
    "unknown case": (["--cases", "audio", "smell"], "smell"),
    "unknown device": (["--device", "tpu"], "device"),
    "unknown flag": (["--lenghts", "512"], "lenghts"),
}


@pytest.mark.parametrize("name", sorted(BAD_FLAGS))
def test_bad_flags_are_refused_with_one_line(name, small_checkpoint, tmp_path, capsys):
    extra, fragment = BAD_FLAGS[name]
    out = tmp_path / "out"
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(out), *extra]
    _assert_refused(capsys, argv, fragment, out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_refused(small_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK,
        "--output-dir",
        str(out),
        "--device",
        "cuda",
    ]
    _assert_refused(capsys, argv, "cuda", out)


def test_existing_results_are_kept_without_overwrite(small_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('["previous run"]\n')
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert (out / "summary.json").read_text() == '["previous run"]\n'
