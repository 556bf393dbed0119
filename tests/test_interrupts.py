"""Interrupted and crashing runs keep valid files and say what happened."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embedbench import RunConfig, load_results, run
from embedbench import measure as measure_module
from embedbench.cli import main
from embedbench.omni.targets.reference import build_reference_target
from embedbench.report import tables
from embedbench.report.banner import banner_html
from embedbench.report.results import RESULT_FILES


def _wait_for_records(out: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            summary = json.loads((out / "summary.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            summary = []
        if summary:
            return
        time.sleep(0.05)
    raise AssertionError("the run never finished a case")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_run_leaves_valid_files_marked_interrupted(small_checkpoint, tmp_path, signum):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "embedbench",
            "run",
            "--model",
            str(small_checkpoint),
            "--lengths",
            "300",
            "--warmup",
            "2",
            "--blocks",
            "400",
            "--processes",
            "1",
            "--iterations",
            "20",
            "--output-dir",
            str(out),
            "--no-progress",
            "--allow-busy",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_records(out, proc)
    proc.send_signal(signum)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    for name in RESULT_FILES:
        json.loads((out / name).read_text())  # every file is still valid JSON
    result = load_results(out)
    assert result.status == "interrupted"
    assert result.metadata["completed_cases"][0] == "text@300"
    assert len(result.summary) == len(result.metadata["completed_cases"]) < 6
    table = tables.pr_table(result)
    assert len(table) == 6
    assert "not measured" in set(table["Host latency reduction"])
    assert "interrupted" in banner_html(result)
    rendered = subprocess.run(
        [sys.executable, "-m", "embedbench", "report", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rendered.returncode == 0 and "not measured" in rendered.stdout


def test_a_crash_inside_a_wrapper_is_recorded_and_the_run_goes_on(
    small_checkpoint, tmp_path, monkeypatch, capsys
):
    def flaky_target(config, facts, table):
        target = build_reference_target(table, facts)
        fixed = target.variants["fixed"]
        calls = {"n": 0}

        def crash_after_validation(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
            if multimodal_embeddings is not None and len(multimodal_embeddings) == 1:
                calls["n"] += 1
                if calls["n"] > 3:  # validation passes, timing crashes (audio: first such case)
                    raise RuntimeError("CUDA error: an illegal memory access\nsecond line")
            return fixed(input_ids, multimodal_embeddings, is_multimodal=is_multimodal)

        target.variants["fixed"] = crash_after_validation
        return target

    monkeypatch.setattr(measure_module, "build_target", flaky_target)
    out = tmp_path / "out"
    code = main(
        [
            "run",
            "--model",
            str(small_checkpoint),
            "--lengths",
            "300",
            "--warmup",
            "2",
            "--blocks",
            "6",
            "--processes",
            "1",
            "--iterations",
            "3",
            "--output-dir",
            str(out),
            "--no-progress",
            "--allow-busy",
        ]
    )
    assert code == 1
    result = load_results(out)
    assert result.status == "complete"
    audio = result.summary_row("audio", 300)
    assert audio["valid"] is False and audio["verdict"] == "invalid"
    assert (
        audio["error"] == "crashed while timing: RuntimeError: CUDA error: an illegal memory access"
    )
    assert result.summary_row("interleaved", 300)["valid"] is True
    assert "invalid" in capsys.readouterr().out


def test_the_isolation_is_restored_when_a_run_fails(small_checkpoint, tmp_path, monkeypatch):
    import gc
    import os

    import torch

    before = (os.sched_getaffinity(0), torch.get_num_threads(), gc.isenabled())

    def broken_floor(**_kwargs):
        raise OSError("disk on fire")

    monkeypatch.setattr(measure_module, "measure_timer_floor", broken_floor)
    config = RunConfig(
        allow_busy=True,
        model=str(small_checkpoint),
        lengths=300,
        warmup=1,
        blocks=2,
        iterations=1,
        processes=1,
        output_dir=str(tmp_path / "out"),
    )
    with pytest.raises(OSError):
        run(config, progress=False, log=lambda _m: None)
    assert (os.sched_getaffinity(0), torch.get_num_threads(), gc.isenabled()) == before
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["status"] == "failed" and "disk on fire" in metadata["error"]
