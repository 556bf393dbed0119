"""Qwen-Omni checkpoint access: config facts, the embedding table, and provenance.

The checkpoint's family comes from its config.json (``model_type``, see
:mod:`embedbench.omni.families`); every family keeps the text table under the same key.

Only ``thinker.model.embed_tokens.weight`` is ever read from a checkpoint. It is located
through ``model.safetensors.index.json`` (or a single ``model.safetensors``), its header is
checked against ``config.json``'s ``thinker_config.text_config`` before any data is read,
and then that one tensor is loaded. No model is initialized.

This module only reads, a real checkpoint or a synthetic one alike; writing and caching
the synthetic stand-in is :mod:`embedbench.omni.synthetic`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from embedbench.errors import CheckpointError, one_line
from embedbench.omni import families
from embedbench.omni.safetensors_header import header_entry, read_header

__all__ = [
    "CONFIG_NAME",
    "EMBEDDING_KEY",
    "FINGERPRINT_VERSION",
    "INDEX_NAME",
    "SINGLE_FILE_NAME",
    "EmbeddingLocation",
    "ThinkerFacts",
    "facts_from_config",
    "fingerprint",
    "load_embedding_table",
    "locate_embedding",
    "read_thinker_facts",
]

EMBEDDING_KEY = "thinker.model.embed_tokens.weight"
INDEX_NAME = "model.safetensors.index.json"
FINGERPRINT_VERSION = "embedbench-fingerprint-v1"
SINGLE_FILE_NAME = "model.safetensors"
CONFIG_NAME = "config.json"


def _fix_hint() -> str:
    """What to pass instead: a checkpoint of a registered family."""
    return f"pass a {' or '.join(f.label for f in families.all_families())} checkpoint directory"


@dataclass(frozen=True)
class ThinkerFacts:
    """What ``config.json``'s ``thinker_config`` says about the embedding table and tokens."""

    hidden_size: int
    vocab_size: int
    audio_token_id: int
    image_token_id: int
    video_token_id: int
    audio_start_token_id: int | None
    audio_end_token_id: int | None
    dtype: str
    thinker_config: dict = field(hash=False, repr=False)
    # The family (a name of embedbench.omni.families) and how config.json told it
    # ("model_type", "thinker_config.model_type", "architectures" or "default").
    family: str = field(default_factory=lambda: families.default().name)
    family_source: str = "default"
    # DeepStack levels (len of vision_config.deepstack_visual_indexes; 0: no DeepStack):
    # vision embeddings then carry (levels + 1) x hidden_size features.
    deepstack_levels: int = 0


@dataclass(frozen=True)
class EmbeddingLocation:
    """Where the embedding table lives, with its header shape and dtype (already checked)."""

    model_dir: Path
    shard: Path
    via_index: bool
    shape: tuple[int, int]
    dtype: str


def _fail(message: str) -> CheckpointError:
    """A CheckpointError whose message is guaranteed to be one line."""
    return CheckpointError(" ".join(message.split()))


def _check_dir(model_dir: str | Path) -> Path:
    path = Path(model_dir).expanduser()
    if not path.exists():
        raise _fail(f"checkpoint {path}: directory does not exist; {_fix_hint()}")
    if not path.is_dir():
        raise _fail(f"checkpoint {path}: is a file, not a directory; {_fix_hint()}")
    return path


def _read_json(path: Path, model_dir: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(f"checkpoint {model_dir}: cannot read {path.name}: {one_line(exc)}") from exc
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(
            f"checkpoint {model_dir}: {path.name} is not valid JSON ({one_line(exc)}); "
            f"restore the {what} from the original checkpoint"
        ) from exc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_thinker_facts(model_dir: str | Path) -> ThinkerFacts:
    """Read hidden size, vocab size, token ids and dtype from ``config.json``'s thinker_config."""
    path = _check_dir(model_dir)
    config_path = path / CONFIG_NAME
    if not config_path.is_file():
        raise _fail(f"checkpoint {path}: no {CONFIG_NAME}; {_fix_hint()}")
    config = _read_json(config_path, path, "config")
    return facts_from_config(config, where=f"checkpoint {path}: {CONFIG_NAME}")


def facts_from_config(config: Any, *, where: str = CONFIG_NAME) -> ThinkerFacts:
    """The thinker facts of a parsed ``config.json`` (``where`` names it in errors)."""
    if not isinstance(config, dict):
        raise _fail(f"{where} is not a JSON object; {_fix_hint()}")
    thinker = config.get("thinker_config")
    if not isinstance(thinker, dict):
        raise _fail(f"{where} has no thinker_config; {_fix_hint()}")
    try:
        family, family_source = families.family_of_config(config)
    except families.UnknownModelType as exc:
        known = ", ".join(f.model_type for f in families.all_families())
        raise _fail(
            f"{where}: model_type {str(exc)!r} is not a family embedbench measures "
            f"(model_type {known}); {_fix_hint()}"
        ) from None
    text = thinker.get("text_config")
    if not isinstance(text, dict):
        raise _fail(f"{where} has no thinker_config.text_config; {_fix_hint()}")

    sizes: dict[str, int] = {}
    for name in ("hidden_size", "vocab_size"):
        value = text.get(name)
        if not _is_int(value) or value <= 0:
            found = "missing" if name not in text else f"{value!r}"
            raise _fail(
                f"{where}: thinker_config.text_config.{name} is {found}, expected a positive "
                f"integer; {_fix_hint()}"
            )
        sizes[name] = value
    vocab = sizes["vocab_size"]

    def token_id(names: tuple[str, ...], required: bool) -> int | None:
        present = [n for n in names if n in thinker]
        if not present:
            if required:
                raise _fail(f"{where}: thinker_config has no {names[0]}; {_fix_hint()}")
            return None
        value = thinker[present[0]]
        if not _is_int(value) or not 0 <= value < vocab:
            raise _fail(
                f"{where}: thinker_config.{present[0]} is {value!r}, expected an integer in "
                f"[0, {vocab}) (vocab_size); {_fix_hint()}"
            )
        return value

    deepstack_levels = 0
    if families.get(family).deepstack:
        vision = thinker.get("vision_config")
        indexes = vision.get("deepstack_visual_indexes") if isinstance(vision, dict) else None
        if not isinstance(indexes, list) or not all(_is_int(i) for i in indexes):
            raise _fail(
                f"{where}: thinker_config.vision_config.deepstack_visual_indexes is "
                f"{'missing' if indexes is None else repr(indexes)}, expected a list of "
                f"layer indexes (a {families.get(family).label} checkpoint has one); "
                f"{_fix_hint()}"
            )
        deepstack_levels = len(indexes)

    dtype = text.get("torch_dtype", text.get("dtype"))
    return ThinkerFacts(
        hidden_size=sizes["hidden_size"],
        vocab_size=vocab,
        audio_token_id=token_id(("audio_token_index", "audio_token_id"), True),
        image_token_id=token_id(("image_token_index", "image_token_id"), True),
        video_token_id=token_id(("video_token_index", "video_token_id"), True),
        audio_start_token_id=token_id(("audio_start_token_id",), False),
        audio_end_token_id=token_id(("audio_end_token_id",), False),
        dtype=dtype if isinstance(dtype, str) and dtype else "bfloat16",
        thinker_config=thinker,
        family=family,
        family_source=family_source,
        deepstack_levels=deepstack_levels,
    )


def _find_shard(path: Path) -> tuple[Path, bool]:
    index_path = path / INDEX_NAME
    if index_path.exists():
        index = _read_json(index_path, path, "index")
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise _fail(
                f"checkpoint {path}: {INDEX_NAME} has no weight_map object; "
                f"restore the index from the original checkpoint"
            )
        shard_name = weight_map.get(EMBEDDING_KEY)
        if shard_name is None:
            raise _fail(
                f"checkpoint {path}: {INDEX_NAME} weight_map has no {EMBEDDING_KEY}; {_fix_hint()}"
            )
        if not isinstance(shard_name, str) or not shard_name:
            raise _fail(
                f"checkpoint {path}: {INDEX_NAME} maps {EMBEDDING_KEY} to {shard_name!r}, "
                f"not a file name; restore the index from the original checkpoint"
            )
        shard = path / shard_name
        if not shard.is_file():
            raise _fail(
                f"checkpoint {path}: shard {shard_name} (holds {EMBEDDING_KEY} per {INDEX_NAME}) "
                f"is missing; download it again"
            )
        return shard, True
    single = path / SINGLE_FILE_NAME
    if single.is_file():
        return single, False
    raise _fail(f"no {INDEX_NAME} or {SINGLE_FILE_NAME} in {path}; {_fix_hint()}")


def locate_embedding(model_dir: str | Path, facts: ThinkerFacts) -> EmbeddingLocation:
    """Find the shard holding the embedding and check its header shape and dtype (no data read)."""
    path = _check_dir(model_dir)
    shard, via_index = _find_shard(path)
    try:
        with _open_random(shard) as fd:
            header = read_header(fd)
    except (OSError, ValueError) as exc:
        raise _fail(
            f"checkpoint {path}: {shard.name} is not a readable safetensors file "
            f"({one_line(exc)}); download it again"
        ) from exc
    if EMBEDDING_KEY not in header:
        source = f"{INDEX_NAME} names {shard.name}, but it" if via_index else shard.name
        raise _fail(
            f"checkpoint {path}: {source} has no tensor {EMBEDDING_KEY}; "
            + ("the index and shards disagree, download them again" if via_index else _fix_hint())
        )
    shape = tuple(int(n) for n in header[EMBEDDING_KEY]["shape"])
    dtype = str(header[EMBEDDING_KEY]["dtype"])

    expected = (facts.vocab_size, facts.hidden_size)
    if shape != expected:
        found = "x".join(str(n) for n in shape)
        raise _fail(
            f"checkpoint {path}: {EMBEDDING_KEY} in {shard.name} has shape {found}, but "
            f"{CONFIG_NAME} thinker_config.text_config says {expected[0]}x{expected[1]} "
            f"(vocab_size x hidden_size); use a config.json that matches the weights"
        )
    if dtype != "BF16":
        raise _fail(
            f"checkpoint {path}: {EMBEDDING_KEY} in {shard.name} is {dtype}, expected BF16; "
            f"pass the original bfloat16 checkpoint"
        )
    return EmbeddingLocation(
        model_dir=path, shard=shard, via_index=via_index, shape=(shape[0], shape[1]), dtype=dtype
    )


_READ_CHUNK = 64 * 2**20


@contextlib.contextmanager
def _open_random(path: Path) -> Iterator[int]:
    """A read-only descriptor with the kernel's readahead off (``POSIX_FADV_RANDOM``),
    so reads fetch exactly the bytes asked for and nothing around them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        yield fd
    finally:
        os.close(fd)


def _read_tensor_range(shard: Path, key: str) -> torch.Tensor:
    """Read exactly ``key``'s bytes (a bf16 tensor) from a safetensors file into CPU memory.

    Only the header and that byte range are read from disk, straight into the tensor's
    memory: no mapping of the file, so nothing is counted twice and timed lookups never
    page in.
    """
    with _open_random(shard) as fd:
        entry = read_header(fd)[key]
        table = torch.empty(entry["shape"], dtype=torch.bfloat16)
        begin, end = entry["range"]
        if end - begin != table.numel() * table.element_size():
            raise ValueError(f"byte range {end - begin} does not match shape {entry['shape']}")
        view = memoryview(table.view(torch.uint8).numpy()).cast("B")
        done = 0
        while done < len(view):
            count = os.preadv(fd, [view[done : done + _READ_CHUNK]], begin + done)
            if count <= 0:
                raise ValueError(f"file ends at byte {begin + done}, inside the tensor")
            done += count
    return table


def load_embedding_table(
    location: EmbeddingLocation, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Read only the embedding tensor's bytes from its shard; return it on ``device``.

    ``locate_embedding`` has already checked the header (shape, BF16); the data is
    then read by its exact byte range (see ``_read_tensor_range``).
    """
    target = torch.device(device)
    try:
        table = _read_tensor_range(location.shard, EMBEDDING_KEY)
    except (OSError, ValueError, KeyError) as exc:
        raise _fail(
            f"checkpoint {location.model_dir}: cannot read {EMBEDDING_KEY} from "
            f"{location.shard.name} ({one_line(exc)}); download the shard again"
        ) from exc
    return table if target.type == "cpu" else table.to(target)


# --- provenance ---


def _tree_size(root: Path) -> tuple[int, int]:
    total = files = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            try:
                total += (Path(folder) / name).stat().st_size
                files += 1
            except OSError:
                continue
    return total, files


def fingerprint(model_dir: str | Path, shard: str | Path, key: str) -> dict[str, Any]:
    """Path, total size and a cheap fingerprint of a checkpoint (no tensor data is read).

    ``fingerprint`` = sha256 over a version tag, the sha256 of the index file's
    bytes (``none`` without an index), the shard's name, ``key`` and its
    safetensors header entry (dtype, shape, data offsets) as canonical JSON.
    What cannot be read is reported under ``error`` instead of a made-up value.
    """
    root = Path(model_dir).expanduser()
    shard_path = root / shard
    out: dict[str, Any] = {"path": str(root), "shard": shard_path.name, "key": key}
    total, files = _tree_size(root)
    out.update(total_bytes=total, files=files)
    try:
        index = root / INDEX_NAME
        index_sha = hashlib.sha256(index.read_bytes()).hexdigest() if index.is_file() else None
        entry = header_entry(shard_path, key)
    except (OSError, ValueError) as exc:
        return {
            **out,
            "index_sha256": None,
            "embedding_header": None,
            "fingerprint": None,
            "error": " ".join(str(exc).split()),
        }
    digest = hashlib.sha256()
    for part in (
        FINGERPRINT_VERSION,
        index_sha or "none",
        shard_path.name,
        key,
        json.dumps(entry, sort_keys=True, separators=(",", ":")),
    ):
        digest.update(part.encode() + b"\n")
    return {
        **out,
        "index_sha256": index_sha,
        "embedding_header": entry,
        "fingerprint": digest.hexdigest(),
        "error": None,
    }
