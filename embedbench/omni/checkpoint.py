"""Qwen-Omni checkpoint access: config facts, the embedding table, and a synthetic stand-in.

The checkpoint's family comes from its config.json (``model_type``, see
:mod:`embedbench.omni.families`); every family keeps the text table under the same key.

Only ``thinker.model.embed_tokens.weight`` is ever read from a checkpoint. It is located
through ``model.safetensors.index.json`` (or a single ``model.safetensors``), its header is
checked against ``config.json``'s ``thinker_config.text_config`` before any data is read,
and then that one tensor is loaded. No model is initialized.

The synthetic writer produces the same file layout as the real checkpoint (config.json,
index, HF-named shards) with a seeded bfloat16 table, so everything downstream runs on a
CPU-only machine without the 22 GB download. Every file it writes, and the directories,
are fsync'ed before the build counts as complete, so a first run does not start while the
kernel is still writing a gigabyte back (see ``ioguard``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from embedbench.errors import CheckpointError, ConfigError, one_line
from embedbench.omni import families
from embedbench.omni.safetensors_header import header_entry, read_header

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_SEED",
    "EMBEDDING_KEY",
    "FINGERPRINT_VERSION",
    "INDEX_NAME",
    "SINGLE_FILE_NAME",
    "SYNTHETIC_FORMAT_VERSION",
    "SYNTHETIC_MARKER",
    "EmbeddingLocation",
    "ThinkerFacts",
    "default_synthetic_checkpoint",
    "facts_from_config",
    "fingerprint",
    "is_synthetic",
    "load_embedding_table",
    "locate_embedding",
    "read_thinker_facts",
    "seeded_table",
    "synthetic_cache_dir",
    "write_synthetic_checkpoint",
    "xdg_cache_dir",
]

EMBEDDING_KEY = "thinker.model.embed_tokens.weight"
INDEX_NAME = "model.safetensors.index.json"
FINGERPRINT_VERSION = "embedbench-fingerprint-v1"
SINGLE_FILE_NAME = "model.safetensors"
CONFIG_NAME = "config.json"

SYNTHETIC_MARKER = "embedbench_synthetic"
SYNTHETIC_FORMAT_VERSION = 1
DEFAULT_SEED = 7451
# Rows generated per chunk. Fixed, so the table depends only on (seed, vocab, hidden).
_CHUNK_ROWS = 2048
# Temporary build directories older than this are leftovers of a killed builder.
_STALE_TMP_SECONDS = 6 * 3600


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


# --------------------------------------------------------------------------- synthetic


def _synthetic_config(
    hidden_size: int, vocab_size: int, seed: int, family: str | None = None
) -> dict[str, Any]:
    """The family's published config layout and token ids, with the synthetic sizes."""
    spec = families.get(family) if family is not None else families.default()
    config = spec.synthetic_config(hidden_size, vocab_size)
    marker = {
        "version": SYNTHETIC_FORMAT_VERSION,
        "seed": seed,
        "hidden_size": hidden_size,
        "vocab_size": vocab_size,
    }
    if not spec.default:  # the default family's marker (and fingerprint) as before
        marker["family"] = spec.name
    head = {k: config.pop(k) for k in ("architectures", "model_type", "torch_dtype")}
    return {**head, SYNTHETIC_MARKER: marker, **config}


def seeded_table(vocab_size: int, hidden_size: int, seed: int) -> torch.Tensor:
    """normal * 0.02 in bfloat16, generated in row chunks (peak memory ~ the bf16 table)."""
    generator = torch.Generator().manual_seed(seed)
    table = torch.empty((vocab_size, hidden_size), dtype=torch.bfloat16)
    for start in range(0, vocab_size, _CHUNK_ROWS):
        rows = min(_CHUNK_ROWS, vocab_size - start)
        chunk = torch.randn((rows, hidden_size), generator=generator, dtype=torch.float32)
        table[start : start + rows].copy_(chunk.mul_(0.02))
    return table


def _shard_name(index: int, count: int) -> str:
    return f"model-{index:05d}-of-{count:05d}.safetensors"


def _fsync_file(path: Path) -> None:
    """Flush ``path``'s data to disk (safetensors' ``save_file`` does not fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries; best effort, as some file systems refuse it (EINVAL)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_files(
    tmp: Path, hidden_size: int, vocab_size: int, seed: int, num_shards: int, family: str | None
) -> None:
    """Write config.json, the index and the shards into ``tmp``; the embedding goes last.

    Each file is fsync'ed once written, and then ``tmp`` itself, so nothing of the
    checkpoint is left dirty in the page cache when the build is declared complete.
    """
    other = torch.Generator().manual_seed(seed + 1)

    def small(*shape: int) -> torch.Tensor:
        return (1.0 + 0.02 * torch.randn(shape, generator=other)).to(torch.bfloat16)

    shards: list[dict[str, torch.Tensor]] = [
        {f"thinker.model.layers.{i}.input_layernorm.weight": small(hidden_size)}
        for i in range(num_shards - 1)
    ]
    # A decoy with a similar name: only the exact EMBEDDING_KEY may be used.
    shards[0]["talker.model.embed_tokens.weight"] = small(8, 8)
    shards.append(
        {
            "thinker.model.norm.weight": small(hidden_size),
            EMBEDDING_KEY: seeded_table(vocab_size, hidden_size, seed),
        }
    )
    weight_map: dict[str, str] = {}
    total_size = 0
    for number, tensors in enumerate(shards, start=1):
        name = _shard_name(number, num_shards)
        save_file(tensors, str(tmp / name), metadata={"format": "pt"})
        (tmp / name).chmod(0o644)
        _fsync_file(tmp / name)
        for key, tensor in tensors.items():
            weight_map[key] = name
            total_size += tensor.numel() * tensor.element_size()
    shards.clear()  # drop the table before writing the small JSON files
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    (tmp / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    config = _synthetic_config(hidden_size, vocab_size, seed, family)
    (tmp / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for name in (INDEX_NAME, CONFIG_NAME):
        _fsync_file(tmp / name)
    _fsync_dir(tmp)


def _format_gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.2f} GB"


def write_synthetic_checkpoint(
    directory: str | Path,
    *,
    hidden_size: int | None = None,
    vocab_size: int | None = None,
    seed: int = DEFAULT_SEED,
    num_shards: int = 2,
    progress: Callable[[str], None] | None = None,
    family: str | None = None,
) -> Path:
    """Write a seeded synthetic checkpoint with the real file layout; return its directory.

    ``family`` (default: the registry's default) picks the published config layout and
    token ids; ``hidden_size`` and ``vocab_size`` default to that model's text table.

    The files are written into a temporary sibling directory that is renamed into place at
    the end, so ``directory`` never holds a half-written checkpoint. The files and the
    directory are fsync'ed before the rename (and the parent after it), so when this
    returns the data is on disk, not pending writeback. ``directory`` must not exist or be
    empty.
    """
    spec = families.get(family) if family is not None else families.default()
    hidden_size = spec.hidden_size if hidden_size is None else hidden_size
    vocab_size = spec.vocab_size if vocab_size is None else vocab_size
    max_token = max(spec.token_ids.values())
    if not _is_int(hidden_size) or hidden_size <= 0:
        raise ConfigError(f"synthetic checkpoint: hidden_size {hidden_size!r} must be an int > 0")
    if not _is_int(vocab_size) or vocab_size <= max_token:
        raise ConfigError(
            f"synthetic checkpoint: vocab_size {vocab_size!r} must be an int > {max_token} "
            f"(the {spec.label} token ids must fit)"
        )
    if not _is_int(num_shards) or num_shards < 2:
        raise ConfigError(f"synthetic checkpoint: num_shards {num_shards!r} must be an int >= 2")
    if not _is_int(seed):
        raise ConfigError(f"synthetic checkpoint: seed {seed!r} must be an int")

    target = Path(directory).expanduser().absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise _fail(
            f"synthetic checkpoint: {target} already exists and is not an empty directory; "
            f"choose a new directory or delete it"
        )
    table_bytes = vocab_size * hidden_size * 2
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(target.parent).free
    except OSError as exc:
        raise _fail(
            f"synthetic checkpoint: cannot use {target.parent} ({one_line(exc)}); "
            f"choose a writable directory"
        ) from exc
    if free < table_bytes + 64 * 2**20:
        raise _fail(
            f"synthetic checkpoint: {target.parent} has {_format_gb(free)} free, the checkpoint "
            f"needs {_format_gb(table_bytes)}; free space or choose another directory"
        )

    if progress is not None:
        progress(
            f"building synthetic checkpoint {vocab_size}x{hidden_size} bf16 "
            f"({_format_gb(table_bytes)}) in {target} ..."
        )
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        _write_files(tmp, hidden_size, vocab_size, seed, num_shards, family)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, target)  # atomic; replaces an empty directory, fails on a full one
        except OSError as exc:
            raise _fail(
                f"synthetic checkpoint: cannot move the new checkpoint to {target} "
                f"({one_line(exc)}); choose a new directory or delete it"
            ) from exc
        _fsync_dir(target.parent)  # the rename itself
    except OSError as exc:
        raise _fail(
            f"synthetic checkpoint: writing into {target.parent} failed ({one_line(exc)}); "
            f"free space or choose a writable directory"
        ) from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if progress is not None:
        progress(f"done in {time.perf_counter() - started:.1f} s")
    return target


def synthetic_cache_dir() -> Path:
    """``$EMBEDBENCH_CACHE`` if set, else the per-user cache directory for embedbench
    (platformdirs'; without platformdirs, as a bare GPU image may be, the XDG one)."""
    env = os.environ.get("EMBEDBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs
    except ImportError:
        return xdg_cache_dir()
    return Path(platformdirs.user_cache_dir("embedbench"))


def xdg_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/embedbench``, else ``~/.cache/embedbench`` (what platformdirs
    gives on Linux)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "embedbench"


def _is_complete(path: Path) -> bool:
    return (path / CONFIG_NAME).is_file() and (path / INDEX_NAME).is_file()


def _remove_stale_builds(target: Path) -> None:
    """Delete temporary build directories that a killed builder left behind long ago."""
    cutoff = time.time() - _STALE_TMP_SECONDS
    try:
        leftovers = list(target.parent.glob(f".{target.name}.tmp-*"))
    except OSError:
        return
    for leftover in leftovers:
        try:
            if leftover.is_dir() and leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue


def default_synthetic_checkpoint(
    hidden_size: int | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    family: str | None = None,
) -> Path:
    """The cached synthetic checkpoint of ``family`` with the real vocab (and by default
    the real hidden size); built once, then reused."""
    spec = families.get(family) if family is not None else families.default()
    hidden_size = spec.hidden_size if hidden_size is None else hidden_size
    name = f"{spec.name}-synthetic-{spec.vocab_size}x{hidden_size}-bf16-v1"
    target = synthetic_cache_dir() / name
    if _is_complete(target):
        return target
    _remove_stale_builds(target)
    try:
        return write_synthetic_checkpoint(
            target,
            hidden_size=hidden_size,
            vocab_size=spec.vocab_size,
            seed=DEFAULT_SEED,
            progress=progress,
            family=family,
        )
    except CheckpointError:
        if _is_complete(target):  # a concurrent builder won the rename race
            return target
        raise


def is_synthetic(model_dir: str | Path) -> bool:
    """True when ``config.json`` carries the marker the synthetic writer puts there."""
    try:
        config = json.loads((Path(model_dir).expanduser() / CONFIG_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get(SYNTHETIC_MARKER), dict)


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
