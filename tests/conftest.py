"""Shared fixtures: a small synthetic checkpoint with the real vocabulary and token ids."""

from pathlib import Path

import pytest

from embedbench import checkpoint

SMALL_HIDDEN = 32


@pytest.fixture(scope="session")
def small_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 152064 x 32 bf16 synthetic checkpoint (two shards + index), built once per session."""
    return checkpoint.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "small", hidden_size=SMALL_HIDDEN
    )
