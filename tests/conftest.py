"""Shared fixtures: a small synthetic checkpoint with the real vocabulary and token ids."""

import os
import tempfile
from pathlib import Path

import pytest

from embedbench import checkpoint

SMALL_HIDDEN = 32

# Runs take a host-wide lock; a private lock dir keeps this test session (and the
# subprocesses it starts) from colliding with another session on the same machine.
os.environ["EMBEDBENCH_LOCK_DIR"] = tempfile.mkdtemp(prefix="embedbench-test-lock-")
# Short guard windows (contention and iowait; default 0.25 s, 0.1 s between workers):
# runs under test are --allow-busy or checked against fakes, so they need not sleep a
# second per run. Tests of the windows themselves pass them explicitly or unset this.
os.environ["EMBEDBENCH_CONTENTION_WINDOW_S"] = "0.02"


@pytest.fixture(scope="session")
def small_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 152064 x 32 bf16 synthetic checkpoint (two shards + index), built once per session."""
    return checkpoint.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "small", hidden_size=SMALL_HIDDEN
    )


@pytest.fixture(scope="session")
def small_run_dir(small_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete quick run (all six cases, 300 tokens, 6 blocks in 3 workers), small checkpoint."""
    from embedbench import RunConfig, run

    out = tmp_path_factory.mktemp("runs") / "quick"
    config = RunConfig(
        model=str(small_checkpoint),
        lengths=300,
        warmup=2,
        blocks=6,
        iterations=3,
        processes=3,
        output_dir=str(out),
        allow_busy=True,
    )
    run(config, progress=False, log=lambda _message: None)
    return out
