"""A noisy neighbour, injected: a memory hog on another core must be seen by its effect.

The hog (benchmarks/neighbour.py) copies 64 MiB buffers on the other allowed core, which
``/proc/stat`` of the measuring core never shows. A run under it must be labelled noisy
(with ``--allow-busy``) or refused with one line (without it); never a plain stable run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import QUICK_DESIGN

from embedbench.harness.isolation import allowed_cores

REPO = Path(__file__).resolve().parents[1]
NEIGHBOUR = REPO / "benchmarks" / "neighbour.py"


@pytest.fixture
def neighbour():
    """Start the hog on the highest allowed core (the run measures on the lowest)."""
    cores = allowed_cores()
    if len(cores) < 2:
        pytest.skip("needs two allowed cores: one to measure, one for the neighbour")

    def start(*args: str) -> subprocess.Popen:
        cmd = [sys.executable, str(NEIGHBOUR), "--core", str(cores[-1]), "--seconds", "240"]
        started.append(subprocess.Popen([*cmd, *args]))
        return started[-1]

    started: list[subprocess.Popen] = []
    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


def _run(out: Path, checkpoint: Path, *flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "embedbench", "run", "--model", str(checkpoint)]
    cmd += [*QUICK_DESIGN, "--cpu-core", str(allowed_cores()[0])]
    cmd += ["--cases", "text", "audio", "--no-progress", "--output-dir", str(out), *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO), "EMBEDBENCH_HOST_WAIT_S": "3"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_a_memory_hog_on_another_core_is_labelled_noisy(neighbour, small_checkpoint, tmp_path):
    neighbour("--on", "1", "--off", "0")
    proc = _run(tmp_path / "out", small_checkpoint, "--allow-busy")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    reading = meta["host_stability"]
    assert reading["verdict"] == "noisy", reading
    assert reading["canary_reads"] > 0 and reading["reasons"]
    assert "noisy host:" in proc.stdout  # the CLI's table says so


def test_without_allow_busy_a_host_that_stays_noisy_is_refused_in_one_line(
    neighbour, small_checkpoint, tmp_path
):
    neighbour("--on", "1", "--off", "0")
    out = tmp_path / "out"
    proc = _run(out, small_checkpoint)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("embedbench: error")]
    if proc.returncode == 0:  # the wait found a quiet moment: then the canary must label it
        meta = json.loads((out / "metadata.json").read_text())
        assert meta["host_stability"]["verdict"] == "noisy", meta["host_stability"]
        return
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "host stayed noisy" in lines[0] and "--allow-busy" in lines[0]
    assert "waiting up to 3 s for a quiet host" in proc.stderr
