"""embedbench.omni.checkpoint (facts, index lookup, one-tensor loading) and
embedbench.omni.synthetic (the synthetic writer and its cache)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from embedbench.errors import CheckpointError, ConfigError
from embedbench.omni import checkpoint as ck
from embedbench.omni import synthetic as syn
from embedbench.omni.families import qwen25_omni

HIDDEN = 16
VOCAB = qwen25_omni.FAMILY.vocab_size


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic checkpoint (real vocab, hidden 16), built once per module."""
    return syn.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("pristine") / "ckpt", hidden_size=HIDDEN
    )


@pytest.fixture
def ckpt(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the small checkpoint that a test may damage."""
    return Path(shutil.copytree(pristine, tmp_path / "ckpt"))


def _config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def _write_config(path: Path, config: dict) -> None:
    (path / "config.json").write_text(json.dumps(config))


def _single_file_checkpoint(path: Path, table: torch.Tensor, pristine: Path) -> Path:
    """config.json from the synthetic checkpoint plus one model.safetensors, no index."""
    path.mkdir()
    config = _config(pristine)
    config["thinker_config"]["text_config"]["hidden_size"] = table.shape[1]
    _write_config(path, config)
    save_file(
        {"thinker.model.norm.weight": torch.ones(table.shape[1]), ck.EMBEDDING_KEY: table},
        str(path / ck.SINGLE_FILE_NAME),
    )
    return path


def _keys(shard: Path) -> set[str]:
    with safe_open(shard, framework="pt") as handle:
        return set(handle.keys())


def _assert_one_line_error(excinfo: pytest.ExceptionInfo, *needles: str) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and "\r" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


# --------------------------------------------------------------------------- facts


def test_facts_of_synthetic_checkpoint(pristine: Path) -> None:
    facts = ck.read_thinker_facts(pristine)
    assert (facts.hidden_size, facts.vocab_size) == (HIDDEN, VOCAB)
    assert (facts.audio_token_id, facts.image_token_id, facts.video_token_id) == (
        151646,
        151655,
        151656,
    )
    assert (facts.audio_start_token_id, facts.audio_end_token_id) == (151647, 151648)
    assert facts.dtype == "bfloat16"
    assert facts.thinker_config["text_config"]["hidden_size"] == HIDDEN
    hash(facts)  # frozen and hashable despite the dict field


def test_facts_of_real_7b_layout(tmp_path: Path) -> None:
    """The real Qwen2.5-Omni-7B config layout (abridged), with optional ids absent."""
    config = {
        "architectures": ["Qwen2_5OmniModel"],
        "thinker_config": {
            "audio_token_index": 151646,
            "image_token_index": 151655,
            "video_token_index": 151656,
            "text_config": {"hidden_size": 3584, "vocab_size": 152064, "dtype": "float16"},
            "vision_config": {"hidden_size": 1280},
        },
        "talker_config": {"hidden_size": 896},
        "token2wav_config": {},
    }
    _write_config(tmp_path, config)
    facts = ck.read_thinker_facts(tmp_path)
    assert (facts.vocab_size, facts.hidden_size) == (152064, 3584)
    assert facts.audio_start_token_id is None and facts.audio_end_token_id is None
    assert facts.dtype == "float16"
    del config["thinker_config"]["text_config"]["dtype"]
    _write_config(tmp_path, config)
    assert ck.read_thinker_facts(tmp_path).dtype == "bfloat16"


def test_missing_model_dir(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(tmp_path / "nope")
    _assert_one_line_error(excinfo, str(tmp_path / "nope"), "does not exist")


def test_model_path_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"x")
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(path)
    _assert_one_line_error(excinfo, str(path), "not a directory")


def test_missing_config(ckpt: Path) -> None:
    (ckpt / "config.json").unlink()
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(ckpt)
    _assert_one_line_error(excinfo, str(ckpt), "config.json")


def test_malformed_config(ckpt: Path) -> None:
    (ckpt / "config.json").write_text('{"thinker_config": {\n')
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(ckpt)
    _assert_one_line_error(excinfo, "config.json", "not valid JSON")


def test_config_without_thinker_config(ckpt: Path) -> None:
    _write_config(ckpt, {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 16})
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(ckpt)
    _assert_one_line_error(excinfo, "config.json", "thinker_config", "Qwen2.5-Omni")


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda t: t.pop("text_config"), "text_config"),
        (lambda t: t["text_config"].pop("hidden_size"), "hidden_size"),
        (lambda t: t["text_config"].update(vocab_size=0), "vocab_size"),
        (lambda t: t["text_config"].update(hidden_size="16"), "hidden_size"),
        (lambda t: t.pop("video_token_index"), "video_token_index"),
        (lambda t: t.update(image_token_index=152064), "image_token_index"),
        (lambda t: t.update(audio_end_token_id=-1), "audio_end_token_id"),
    ],
    ids=[
        "no-text_config",
        "no-hidden",
        "zero-vocab",
        "str-hidden",
        "no-video-id",
        "image-id-out-of-vocab",
        "negative-audio-end",
    ],
)
def test_bad_config_fields(ckpt: Path, mutate, needle: str) -> None:
    config = _config(ckpt)
    mutate(config["thinker_config"])
    _write_config(ckpt, config)
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(ckpt)
    _assert_one_line_error(excinfo, "config.json", needle)


# --------------------------------------------------------------------------- locate / load


def test_index_lookup_finds_the_right_shard(pristine: Path) -> None:
    facts = ck.read_thinker_facts(pristine)
    loc = ck.locate_embedding(pristine, facts)
    shards = sorted(pristine.glob("model-*-of-*.safetensors"))
    assert [s.name for s in shards] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert loc.via_index and loc.shard == pristine / "model-00002-of-00002.safetensors"
    assert (loc.shape, loc.dtype) == ((VOCAB, HIDDEN), "BF16")
    assert ck.EMBEDDING_KEY in _keys(loc.shard)
    assert ck.EMBEDDING_KEY not in _keys(shards[0])
    assert _keys(shards[0])  # the other shard is not empty
    index = json.loads((pristine / ck.INDEX_NAME).read_text())
    assert index["weight_map"][ck.EMBEDDING_KEY] == loc.shard.name
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size()
        for s in shards
        for t in [safe_open(s, framework="pt").get_tensor(k) for k in _keys(s)]
    )


def test_more_shards_each_hold_something(tmp_path: Path) -> None:
    path = syn.write_synthetic_checkpoint(tmp_path / "c", hidden_size=HIDDEN, num_shards=4)
    shards = sorted(path.glob("model-*-of-00004.safetensors"))
    assert len(shards) == 4 and all(_keys(s) for s in shards)
    loc = ck.locate_embedding(path, ck.read_thinker_facts(path))
    assert loc.shard == shards[-1]


def test_single_file_without_index(pristine: Path, tmp_path: Path) -> None:
    table = torch.randn(VOCAB, 8).to(torch.bfloat16)
    path = _single_file_checkpoint(tmp_path / "single", table, pristine)
    loc = ck.locate_embedding(path, ck.read_thinker_facts(path))
    assert loc.shard == path / ck.SINGLE_FILE_NAME and not loc.via_index
    assert torch.equal(ck.load_embedding_table(loc), table)


def test_loaded_table_is_the_written_one(pristine: Path, tmp_path: Path) -> None:
    loc = ck.locate_embedding(pristine, ck.read_thinker_facts(pristine))
    table = ck.load_embedding_table(loc)
    assert table.dtype == torch.bfloat16 and table.shape == (VOCAB, HIDDEN)
    assert table.is_contiguous() and table.device == torch.device("cpu")
    assert torch.equal(table, syn.seeded_table(VOCAB, HIDDEN, syn.DEFAULT_SEED))
    assert 0.015 < table.float().std().item() < 0.025

    same = syn.write_synthetic_checkpoint(tmp_path / "same", hidden_size=HIDDEN)
    other = syn.write_synthetic_checkpoint(tmp_path / "other", hidden_size=HIDDEN, seed=1)
    load = [
        ck.load_embedding_table(ck.locate_embedding(p, ck.read_thinker_facts(p)))
        for p in (same, other)
    ]
    assert torch.equal(load[0], table)
    assert not torch.equal(load[1], table)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_loaded_table_is_not_a_file_mapping(pristine: Path) -> None:
    loc = ck.locate_embedding(pristine, ck.read_thinker_facts(pristine))
    table = ck.load_embedding_table(loc)
    pointer = table.untyped_storage().data_ptr()
    for line in Path("/proc/self/maps").read_text().splitlines():
        start, end = (int(v, 16) for v in line.split()[0].split("-"))
        if start <= pointer < end:
            assert loc.shard.name not in line


def test_only_the_embedding_tensor_is_read(pristine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[tuple[int, int]] = []
    real_pread, real_preadv = ck.os.pread, ck.os.preadv

    def pread(fd, count, offset):
        reads.append((offset, offset + count))
        return real_pread(fd, count, offset)

    def preadv(fd, buffers, offset):
        reads.append((offset, offset + sum(len(b) for b in buffers)))
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(ck.os, "pread", pread)
    monkeypatch.setattr(ck.os, "preadv", preadv)
    loc = ck.locate_embedding(pristine, ck.read_thinker_facts(pristine))
    raw = loc.shard.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header_reads = [(0, 8), (8, 8 + header_len)]
    assert reads == header_reads  # locate reads the header only
    reads.clear()
    table = ck.load_embedding_table(loc)
    begin, end = json.loads(raw[8 : 8 + header_len])[ck.EMBEDDING_KEY]["data_offsets"]
    data = (8 + header_len + begin, 8 + header_len + end)
    # Only the header and the table's own byte range are read.
    assert reads[:2] == header_reads
    assert all(data[0] <= a and b <= data[1] for a, b in reads[2:])
    assert sum(b - a for a, b in reads[2:]) == data[1] - data[0]
    with safe_open(loc.shard, framework="pt") as handle:
        assert torch.equal(table, handle.get_tensor(ck.EMBEDDING_KEY))


def test_index_without_embedding_key(ckpt: Path) -> None:
    index = json.loads((ckpt / ck.INDEX_NAME).read_text())
    del index["weight_map"][ck.EMBEDDING_KEY]
    (ckpt / ck.INDEX_NAME).write_text(json.dumps(index))
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, ck.INDEX_NAME, ck.EMBEDDING_KEY)


def test_index_points_to_shard_without_the_key(ckpt: Path) -> None:
    index = json.loads((ckpt / ck.INDEX_NAME).read_text())
    index["weight_map"][ck.EMBEDDING_KEY] = "model-00001-of-00002.safetensors"
    (ckpt / ck.INDEX_NAME).write_text(json.dumps(index))
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, "model-00001-of-00002.safetensors", ck.EMBEDDING_KEY)


def test_missing_shard(ckpt: Path) -> None:
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, "model-00002-of-00002.safetensors", "missing")


@pytest.mark.parametrize("text", ['{"weight_map": {', "[1, 2]", '{"metadata": {}}'])
def test_malformed_index(ckpt: Path, text: str) -> None:
    (ckpt / ck.INDEX_NAME).write_text(text)
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, ck.INDEX_NAME)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_bad_shard_file(ckpt: Path, damage: str) -> None:
    shard = ckpt / "model-00002-of-00002.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(
        {
            "truncate": data[: len(data) // 2],
            "garbage": b"this is not safetensors\n" * 100,
            "empty": b"",
        }[damage]
    )
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, shard.name, "safetensors")


def test_wrong_shape(ckpt: Path) -> None:
    config = _config(ckpt)
    config["thinker_config"]["text_config"]["hidden_size"] = 32
    _write_config(ckpt, config)
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, f"{VOCAB}x{HIDDEN}", f"{VOCAB}x32", ck.EMBEDDING_KEY)


def test_wrong_dtype(pristine: Path, tmp_path: Path) -> None:
    path = _single_file_checkpoint(tmp_path / "f32", torch.zeros(VOCAB, 4), pristine)
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(path, ck.read_thinker_facts(path))
    _assert_one_line_error(excinfo, "F32", "BF16", ck.EMBEDDING_KEY)


def test_neither_index_nor_single_file(ckpt: Path) -> None:
    (ckpt / ck.INDEX_NAME).unlink()
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(ckpt, ck.read_thinker_facts(ckpt))
    _assert_one_line_error(excinfo, ck.INDEX_NAME, ck.SINGLE_FILE_NAME, str(ckpt))


def test_single_file_without_the_key(pristine: Path, tmp_path: Path) -> None:
    path = _single_file_checkpoint(
        tmp_path / "s", torch.zeros(VOCAB, 4, dtype=torch.bfloat16), pristine
    )
    save_file({"model.embed_tokens.weight": torch.zeros(2, 4)}, str(path / ck.SINGLE_FILE_NAME))
    with pytest.raises(CheckpointError) as excinfo:
        ck.locate_embedding(path, ck.read_thinker_facts(path))
    _assert_one_line_error(excinfo, ck.SINGLE_FILE_NAME, ck.EMBEDDING_KEY)


# --------------------------------------------------------------------------- writer / cache


def test_synthetic_marker(pristine: Path, tmp_path: Path) -> None:
    assert syn.is_synthetic(pristine)
    marker = _config(pristine)[syn.SYNTHETIC_MARKER]
    assert marker["seed"] == syn.DEFAULT_SEED
    assert (marker["hidden_size"], marker["vocab_size"]) == (HIDDEN, VOCAB)
    assert not syn.is_synthetic(tmp_path)  # no config.json
    _write_config(tmp_path, {"thinker_config": {}})
    assert not syn.is_synthetic(tmp_path)


def test_writer_refuses_non_empty_directory(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError) as excinfo:
        syn.write_synthetic_checkpoint(target, hidden_size=HIDDEN)
    _assert_one_line_error(excinfo, str(target), "already exists")
    assert os.listdir(target) == ["notes.txt"]


def test_writer_accepts_empty_directory_and_reports_progress(tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    messages: list[str] = []
    assert syn.write_synthetic_checkpoint(target, hidden_size=HIDDEN, progress=messages.append)
    assert syn.is_synthetic(target)
    assert len(messages) == 2 and "building" in messages[0] and f"{VOCAB}x{HIDDEN}" in messages[0]
    assert messages[1].startswith("done in ")
    assert sorted(os.listdir(tmp_path)) == ["empty"]  # no temporary directory left


def test_writer_crash_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing_save(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr(syn, "save_file", failing_save)
    with pytest.raises(RuntimeError, match="simulated crash"):
        syn.write_synthetic_checkpoint(tmp_path / "c", hidden_size=HIDDEN)
    assert os.listdir(tmp_path) == []


def test_writer_rejects_bad_arguments(tmp_path: Path) -> None:
    for kwargs in ({"hidden_size": 0}, {"vocab_size": 1000}, {"num_shards": 1}):
        with pytest.raises(ConfigError):
            syn.write_synthetic_checkpoint(tmp_path / "c", **kwargs)
    assert os.listdir(tmp_path) == []


def test_cache_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path))
    assert syn.synthetic_cache_dir() == tmp_path
    monkeypatch.delenv("EMBEDBENCH_CACHE")
    assert syn.synthetic_cache_dir().name == "embedbench"


def test_cache_dir_without_platformdirs_is_the_xdg_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare GPU image has no platformdirs: $XDG_CACHE_HOME/embedbench, else
    ~/.cache/embedbench (what platformdirs itself gives on Linux)."""
    monkeypatch.delenv("EMBEDBENCH_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with_platformdirs = syn.synthetic_cache_dir()
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # import raises ImportError
    assert syn.synthetic_cache_dir() == tmp_path / "xdg" / "embedbench"
    if sys.platform.startswith("linux"):
        assert with_platformdirs == syn.synthetic_cache_dir()
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert syn.synthetic_cache_dir() == tmp_path / "home" / ".cache" / "embedbench"
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path / "own"))
    assert syn.synthetic_cache_dir() == tmp_path / "own"  # the variable still comes first


def test_default_checkpoint_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path))
    messages: list[str] = []
    first = syn.default_synthetic_checkpoint(HIDDEN, progress=messages.append)
    assert first == tmp_path / f"qwen2.5-omni-synthetic-{VOCAB}x{HIDDEN}-bf16-v1"
    assert any("building" in m for m in messages)
    shard = first / "model-00002-of-00002.safetensors"
    stamp = shard.stat().st_mtime_ns

    messages.clear()
    second = syn.default_synthetic_checkpoint(HIDDEN, progress=messages.append)
    assert second == first and messages == []
    assert shard.stat().st_mtime_ns == stamp
    loc = ck.locate_embedding(second, ck.read_thinker_facts(second))
    assert loc.shape == (VOCAB, HIDDEN)


def test_default_checkpoint_tolerates_a_concurrent_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path))
    target = tmp_path / f"qwen2.5-omni-synthetic-{VOCAB}x{HIDDEN}-bf16-v1"
    real_write_files = syn._write_files

    raced: list[bool] = []

    def write_files_then_lose_race(tmp, *args):
        real_write_files(tmp, *args)
        if not raced:  # another process finishes first
            raced.append(True)
            syn.write_synthetic_checkpoint(target, hidden_size=HIDDEN)

    monkeypatch.setattr(syn, "_write_files", write_files_then_lose_race)
    assert syn.default_synthetic_checkpoint(HIDDEN) == target
    assert raced
    assert os.listdir(tmp_path) == [target.name]  # our temporary directory was removed
    assert ck.read_thinker_facts(target).hidden_size == HIDDEN


def test_default_checkpoint_removes_stale_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path))
    name = f"qwen2.5-omni-synthetic-{VOCAB}x{HIDDEN}-bf16-v1"
    stale, fresh = tmp_path / f".{name}.tmp-old", tmp_path / f".{name}.tmp-new"
    for leftover in (stale, fresh):
        leftover.mkdir()
        (leftover / "model-00001-of-00002.safetensors").write_bytes(b"partial")
    old = time.time() - 2 * syn._STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    syn.default_synthetic_checkpoint(HIDDEN)
    assert sorted(os.listdir(tmp_path)) == sorted([name, fresh.name])
