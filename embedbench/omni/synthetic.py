"""The synthetic checkpoint: written, cached and recognised.

A seeded stand-in for a Qwen-Omni checkpoint, with the same file layout as the real one
(config.json in the family's published layout and token ids, the index, HF-named shards)
and a seeded bfloat16 table under the real embedding key, so everything downstream runs on
a CPU-only machine without the 22 GB download. Reading it is
:mod:`embedbench.omni.checkpoint`'s job, as for any checkpoint; this module only writes
it (``write_synthetic_checkpoint``), builds and reuses the embedded default in the cache
directory (``default_synthetic_checkpoint``, ``synthetic_cache_dir``), and tells one from
a real checkpoint by the marker in its config.json (``is_synthetic``).

Every file it writes, and the directories, are fsync'ed before the build counts as
complete, so a first run does not start while the kernel is still writing a gigabyte back
(see ``ioguard``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from embedbench.errors import CheckpointError, ConfigError, one_line
from embedbench.omni import families
from embedbench.omni.checkpoint import CONFIG_NAME, EMBEDDING_KEY, INDEX_NAME, _fail, _is_int

__all__ = [
    "DEFAULT_SEED",
    "SYNTHETIC_FORMAT_VERSION",
    "SYNTHETIC_MARKER",
    "default_synthetic_checkpoint",
    "is_synthetic",
    "seeded_table",
    "synthetic_cache_dir",
    "write_synthetic_checkpoint",
    "xdg_cache_dir",
]

SYNTHETIC_MARKER = "embedbench_synthetic"
SYNTHETIC_FORMAT_VERSION = 1
DEFAULT_SEED = 7451
# Rows generated per chunk. Fixed, so the table depends only on (seed, vocab, hidden).
_CHUNK_ROWS = 2048
# Temporary build directories older than this are leftovers of a killed builder.
_STALE_TMP_SECONDS = 6 * 3600


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
