"""The bad-input matrix: one line naming the problem and the fix, exit 2, no traceback,
and nothing already on disk changed, even with --overwrite."""

import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import QUICK
from safetensors.torch import save_file

from embedbench.cli import main
from embedbench.omni import checkpoint
from embedbench.report import results as results_module

OLD_RUN = {"metadata.json": '{"old": true}\n', "summary.json": '["previous run"]\n'}


def _index(ck: Path) -> dict:
    return json.loads((ck / checkpoint.INDEX_NAME).read_text())


def _embedding_shard(ck: Path) -> Path:
    return ck / _index(ck)["weight_map"][checkpoint.EMBEDDING_KEY]


def _edit_config(ck: Path, change: Callable[[dict], None]) -> None:
    config = json.loads((ck / "config.json").read_text())
    change(config)
    (ck / "config.json").write_text(json.dumps(config))


def _truncate_shard(ck: Path) -> None:
    shard = _embedding_shard(ck)
    shard.write_bytes(shard.read_bytes()[:1000])


def _drop_embedding_key(ck: Path) -> None:
    index = _index(ck)
    del index["weight_map"][checkpoint.EMBEDDING_KEY]
    (ck / checkpoint.INDEX_NAME).write_text(json.dumps(index))


def _float16_table(ck: Path) -> None:
    table = torch.zeros(152064, 32, dtype=torch.float16)
    save_file({checkpoint.EMBEDDING_KEY: table}, _embedding_shard(ck))


# name: (checkpoint damage or None, extra CLI args, fragment of the message)
CHECKPOINT_ROWS = {
    "missing config.json": (lambda ck: (ck / "config.json").unlink(), "config.json"),
    "malformed config.json": (lambda ck: (ck / "config.json").write_text("{"), "config.json"),
    "no thinker_config": (
        lambda ck: (ck / "config.json").write_text(json.dumps({"architectures": []})),
        "thinker_config",
    ),
    "vocab size mismatch": (
        lambda ck: _edit_config(
            ck, lambda c: c["thinker_config"]["text_config"].update(vocab_size=151700)
        ),
        "shape",
    ),
    "hidden size mismatch": (
        lambda ck: _edit_config(
            ck, lambda c: c["thinker_config"]["text_config"].update(hidden_size=64)
        ),
        "shape",
    ),
    "index JSON malformed": (
        lambda ck: (ck / checkpoint.INDEX_NAME).write_text("{not json"),
        checkpoint.INDEX_NAME,
    ),
    "index without the embedding": (_drop_embedding_key, checkpoint.EMBEDDING_KEY),
    "missing shard": (lambda ck: _embedding_shard(ck).unlink(), "shard"),
    "shard truncated": (_truncate_shard, "safetensors"),
    "shard not safetensors": (
        lambda ck: _embedding_shard(ck).write_bytes(b"PK\x03\x04 this is a zip"),
        "safetensors",
    ),
    "wrong dtype": (_float16_table, "expected BF16"),
}

FLAG_ROWS = {
    "missing model dir": (["--model", "/nonexistent/model"], "/nonexistent/model"),
    "core outside affinity": (["--cpu-core", "100000"], "affinity"),
    "negative core": (["--cpu-core", "-1"], "cpu_core must be >= 0"),
    "length below 300": (["--lengths", "299"], ">= 300"),
    "duplicate lengths": (["--lengths", "512", "512"], "duplicates"),
    "non-integer length": (["--lengths", "512.5"], "integer"),
    "blocks 0": (["--blocks", "0"], "blocks must be >= 2"),
    "odd blocks": (
        ["--blocks", "7"],
        "blocks must be even, so that half the blocks run the baseline first, got 7; use 6 or 8",
    ),
    "odd blocks below what processes need": (
        ["--blocks", "5"],
        "got 5; use 6 (--processes 3 needs at least 6)",
    ),
    "processes the blocks cannot hold": (["--blocks", "4"], "pass --processes 2"),
    "processes 0": (["--processes", "0"], "processes must be >= 1"),
    "iterations 0": (["--iterations", "0"], "iterations must be >= 1"),
    "negative warmup": (["--warmup", "-1"], "warmup must be >= 0"),
    "non-integer seed": (["--seed", "abc"], "seed must be an integer"),
    "unknown case": (["--cases", "audio", "smell"], "smell"),
    "empty cases": (["--cases"], "--cases"),
    "unknown device": (["--device", "tpu"], "unknown device"),
    "unknown target": (["--target", "llama"], "unknown target"),
    "unknown timing window": (["--timing-window", "loose"], "unknown timing_window"),
    "unknown lm shim": (["--lm-shim", "bogus"], "unknown lm_shim 'bogus'; choose from flat"),
    "unknown flag": (["--lenghts", "512"], "--lenghts 512; did you mean --lengths?"),
}


@pytest.fixture()
def old_results(tmp_path: Path) -> Path:
    """An output dir holding a previous run's files, which no refusal may touch."""
    out = tmp_path / "previous"
    out.mkdir()
    for name, text in OLD_RUN.items():
        (out / name).write_text(text)
    return out


def _assert_refused(capsys, argv: list[str], fragment: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    # A busy machine adds the --allow-busy warning line; the refusal is the other line.
    err = "".join(
        line
        for line in captured.err.splitlines(keepends=True)
        if not line.startswith("warning: busy")
    )
    assert err.startswith("embedbench"), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment.lower() in err.lower(), err


def _assert_untouched(out: Path) -> None:
    assert sorted(p.name for p in out.iterdir()) == sorted(OLD_RUN)
    for name, text in OLD_RUN.items():
        assert (out / name).read_text() == text


@pytest.mark.parametrize("name", sorted(CHECKPOINT_ROWS))
def test_bad_checkpoint(name, small_checkpoint, tmp_path, old_results, capsys):
    ck = shutil.copytree(small_checkpoint, tmp_path / "ck")
    damage, fragment = CHECKPOINT_ROWS[name]
    damage(ck)
    argv = ["run", "--model", str(ck), *QUICK, "--output-dir", str(old_results), "--overwrite"]
    _assert_refused(capsys, argv, fragment)
    _assert_untouched(old_results)


@pytest.mark.parametrize("name", sorted(FLAG_ROWS))
def test_bad_flag(name, small_checkpoint, old_results, capsys):
    extra, fragment = FLAG_ROWS[name]
    argv = [
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK,
        "--output-dir",
        str(old_results),
        "--overwrite",
        *extra,
    ]
    _assert_refused(capsys, argv, fragment)
    _assert_untouched(old_results)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda(small_checkpoint, old_results, capsys):
    argv = [
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK,
        "--output-dir",
        str(old_results),
        "--overwrite",
        "--device",
        "cuda",
    ]
    _assert_refused(capsys, argv, "--device cpu or auto")
    _assert_untouched(old_results)


def test_existing_results_without_overwrite(small_checkpoint, old_results, capsys):
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(old_results)]
    _assert_refused(capsys, argv, "--overwrite")
    _assert_untouched(old_results)


def test_output_dir_is_a_file(small_checkpoint, tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", str(target)]
    _assert_refused(capsys, argv, "is a file")
    assert target.read_text() == "keep me"


def test_output_dir_not_writable(small_checkpoint, capsys):
    # /proc refuses new entries even to root, for whom permission bits do not apply.
    argv = ["run", "--model", str(small_checkpoint), *QUICK, "--output-dir", "/proc/embedbench/out"]
    _assert_refused(capsys, argv, "not writable")


def test_disk_full_leaves_previous_files_intact(small_checkpoint, old_results, capsys, monkeypatch):
    def no_space(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results_module.os, "fsync", no_space)
    argv = [
        "run",
        "--model",
        str(small_checkpoint),
        *QUICK,
        "--output-dir",
        str(old_results),
        "--overwrite",
        "--no-progress",
    ]
    _assert_refused(capsys, argv, "No space left on device")
    _assert_untouched(old_results)
