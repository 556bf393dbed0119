"""The run-level guards: a busy pinned core, a second concurrent run, the A/A check,
and that no secret from the environment reaches any output."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from helpers import QUICK_DESIGN

from embedbench import load_results
from embedbench.cli import main
from embedbench.harness import ioguard, isolation
from embedbench.harness.hostlock import host_lock
from embedbench.harness.isolation import allowed_cores
from embedbench.omni.scenarios import CASES
from embedbench.report import summary, tables

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "embedbench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_a_busy_pinned_core_is_refused_before_anything_is_written(
    small_checkpoint, tmp_path, monkeypatch, capsys
):
    # The pinned core reads busy and the disks quiet in planted /proc counters, so the
    # refusal is the guard's, whatever else this machine runs (how a real spinning core
    # reads: test_contention.py).
    cores = allowed_cores()
    busy_core = cores[-1]
    ticks = iter(range(25, 10**6, 25))

    def jiffies(_path=None) -> dict[int, tuple[int, int]]:
        n = next(ticks)
        return {c: (n, 0) if c == busy_core else (0, n) for c in cores}

    monkeypatch.setattr(isolation, "read_cpu_jiffies", jiffies)
    monkeypatch.setattr(ioguard, "read_writeback_bytes", lambda _path=None: (0, 0))
    monkeypatch.setattr(ioguard, "read_iowait_jiffies", lambda _path=None: (0, next(ticks)))
    out = tmp_path / "out"
    argv = ["run", "--model", str(small_checkpoint), *QUICK_DESIGN, "--no-progress"]
    assert main([*argv, "--cpu-core", str(busy_core), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    (error,) = err.splitlines()
    assert error.startswith(f"embedbench: error: cpu core {busy_core} is 100 % busy"), error
    assert "--allow-busy" in error
    assert not out.exists()


def test_a_second_concurrent_run_is_refused_with_the_holders_pid(small_checkpoint, tmp_path):
    out = tmp_path / "out"
    with host_lock():
        proc = _run(
            "run",
            "--model",
            str(small_checkpoint),
            *QUICK_DESIGN,
            "--allow-busy",
            "--output-dir",
            str(out),
        )
    assert proc.returncode == 2, proc.stderr
    assert f"pid {os.getpid()}" in proc.stderr and proc.stderr.count("\n") == 1
    assert not out.exists()


@pytest.fixture(scope="module")
def aa_run(small_checkpoint, tmp_path_factory):
    """A quick run with the A/A check (``--aa``), through the CLI: (dir, completed process)."""
    out = tmp_path_factory.mktemp("aa") / "out"
    proc = _run(
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK_DESIGN,
        "--allow-busy",
        "--aa",
        "--output-dir",
        str(out),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_aa_check_reports_the_noise_floor_beside_each_case(aa_run):
    out, proc = aa_run
    result = load_results(out)
    assert result.metadata["aa_check"] is True
    for row in result.summary:
        aa = row["aa"]
        low, high = aa["reduction_ci95_pct"]
        assert aa["covers_zero"] == (low <= 0.0 <= high)
        assert aa["workers"] == row["workers"] == 3 and aa["ci_level"] == 0.95
        assert "noise_band_pct" not in row  # the A/A check never widens the verdict
    assert "A/A interval" in tables.statistics_table(result).columns
    assert "A/A covers 0" in proc.stdout


def _aa_of(records, case):
    return summary.aa_summary([r for r in records if r["case"] == case])


def test_aa_records_have_a_file_of_their_own(aa_run):
    # micro-raw.json holds what the original's would (timer floor and the A/B blocks), so
    # a reader that does not filter on scope (the PR's own summary code) mixes nothing in.
    out, _ = aa_run
    raw = json.loads((out / "micro-raw.json").read_text())
    aa_raw = json.loads((out / "aa-raw.json").read_text())
    assert {r["scope"] for r in raw} == {"overhead", "whole_wrapper"}
    assert {r["scope"] for r in aa_raw} == {"aa_check"}
    assert len(aa_raw) == len(CASES) * 6 * 2
    assert set(aa_raw[0]) == set(raw[-1])  # the same record shape
    result = load_results(out)
    assert result.records == raw and result.aa_records == aa_raw
    for row in result.summary:  # the summary's A/A check is the statistic of aa-raw.json
        assert row["aa"] == _aa_of(aa_raw, row["case"])
    ok = _run("validate", str(out))
    assert ok.returncode == 0 and "aa-raw.json" in ok.stdout


def test_an_old_dir_with_aa_records_in_micro_raw_reads_the_same(aa_run, tmp_path):
    out, _ = aa_run
    old = tmp_path / "old"
    shutil.copytree(out, old)
    raw = json.loads((old / "micro-raw.json").read_text())
    aa_raw = json.loads((old / "aa-raw.json").read_text())
    (old / "micro-raw.json").write_text(json.dumps(raw + aa_raw))  # as written before
    (old / "aa-raw.json").unlink()
    meta = json.loads((old / "metadata.json").read_text())
    meta["schema_version"] = 4  # from version 5 on, A/A records are only in aa-raw.json
    (old / "metadata.json").write_text(json.dumps(meta))
    new, moved = load_results(out), load_results(old)
    assert moved.records == new.records and moved.aa_records == new.aa_records
    assert moved.summary == new.summary
    for row in moved.summary:
        assert row["aa"] == _aa_of(moved.aa_records, row["case"])
    assert tables.statistics_table(moved).equals(tables.statistics_table(new))


SECRETS = {
    "HF_TOKEN": "hf_FAKE0123456789secret",
    "AWS_SECRET_ACCESS_KEY": "FAKEawsSECRETkey0123456789",
    "GITHUB_TOKEN": "ghp_FAKE0123456789token",
    "VLLM_API_KEY": "FAKEvllmAPIkey42",
}


def _assert_no_secret(text: str, where: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name} leaked into {where}"


def test_no_secret_reaches_any_output_file_or_notebook(small_checkpoint, tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "out"
    proc = _run(
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK_DESIGN,
        "--allow-busy",
        "--output-dir",
        str(out),
        "--no-progress",
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    _assert_no_secret(proc.stdout + proc.stderr, "the CLI output")
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["environment"] == {"OMP_NUM_THREADS": "1"}
    for path in out.iterdir():
        _assert_no_secret(path.read_text(), path.name)
    html = tmp_path / "r.html"
    assert _run("report", str(out), "--html", str(html)).returncode == 0
    _assert_no_secret(html.read_text(), "the HTML report")

    executed = tmp_path / "run.ipynb"
    pm.execute_notebook(
        str(NOTEBOOKS / "run.ipynb"),
        str(executed),
        kernel_name="python3",
        progress_bar=False,
        parameters={
            "model": str(small_checkpoint),
            "lengths": 300,
            "warmup": 1,
            "blocks": 2,
            "processes": 1,
            "iterations": 2,
            "allow_busy": True,
            "output_dir": str(tmp_path / "nb"),
        },
    )
    text = executed.read_text()
    assert "OMP_NUM_THREADS" in text  # the allow-listed variable is shown ...
    _assert_no_secret(text, "the executed notebook")  # ... and no secret is
    nbformat.validate(nbformat.read(executed, as_version=4))


def test_progress_away_from_a_terminal_is_a_line_per_tenth_and_no_bar(monkeypatch):
    import io

    from embedbench import runner

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, enabled in ((io.StringIO(), True), (io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        with runner._progress_bar(200, enabled) as advance:
            for _ in range(40):
                advance(5)
        text = stream.getvalue()
        if not enabled:
            assert text == ""
        elif isinstance(stream, Terminal):
            assert "\r" in text and "200/200" in text  # tqdm's bar, redrawn in place
        else:
            assert text.splitlines() == [
                f"embedbench: {p} % of 200 calls" for p in range(10, 101, 10)
            ]
