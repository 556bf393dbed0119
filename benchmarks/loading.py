"""Loading cost: the embedding table alone (embedbench) vs reading the whole shard.

A synthetic checkpoint laid out like Qwen2.5-Omni-7B is written with safetensors into a
temporary directory: ``config.json``, ``model.safetensors.index.json`` over four shards,
the embedding (152064 × 3584 bf16, 1.09 GB) in shard 2 between neighbours of about
400 MB (an audio-tower-sized tensor sorted before it, two MLP weights after it), and two
further shards of about 100 MB. Then, each in a FRESH subprocess:

- ``embedbench``: ``read_thinker_facts`` + ``locate_embedding`` + ``load_embedding_table``
  (safe_open's memory map, then a clone into ordinary memory);
- ``load_file``: ``safetensors.torch.load_file(shard)`` with its default mmap backend
  (returns views of the mapping: nothing is read until a tensor is touched);
- ``load_file+clone``: the same, then every tensor cloned into ordinary memory (what
  reading the whole shard costs once the data is actually used);
- ``load_file pread``: ``load_file(shard, backend="pread")`` (eager read of every tensor).
- ``exact pread (prototype)``: not embedbench — what would close the bytes-read target:
  ``pread`` of only the table's byte range with the kernel's readahead off.

Per run: wall time of the operation (imports excluded), peak ``RssAnon`` (anonymous
memory: the private copy; ``VmRSS`` also counts the page-cache pages mapped from the
file, so it double-counts a clone out of a mapping) sampled from the parent every 2 ms
through ``/proc/<pid>/status`` (a separate process, so the GIL cannot hide a peak), the
child's ``VmHWM`` (the kernel's exact peak VmRSS), and bytes read: ``/proc/self/io``
``read_bytes`` (from storage) and ``rchar`` (read() syscalls only: mmap faults are not
in it), plus the shard's pages resident in the page cache after the run (``mincore``).
"Cold" runs first evict the shards' pages with ``posix_fadvise(DONTNEED)`` (only these
files; nothing system-wide is dropped); "warm" runs follow a run of the same mode.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common as C

EMBEDDING_KEY = "thinker.model.embed_tokens.weight"
MODES = ("embedbench", "load_file", "load_file+clone", "load_file pread", "exact pread (prototype)")
_CHUNK = 64 * 2**20
_STATUS_KEYS = ("RssAnon", "RssFile", "VmRSS", "VmHWM")


def exact_read(shard: Path, key: str) -> Any:
    """Prototype (not embedbench): read only ``key``'s byte range with pread, readahead off.

    ``POSIX_FADV_RANDOM`` (set before the first read) turns the kernel's readahead off for
    this file, so the page cache is filled with exactly the header and the requested range;
    the bytes go straight into the tensor's memory (no mapping, so VmRSS does not count
    them twice).
    """
    import torch

    fd = os.open(shard, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        length = int.from_bytes(os.pread(fd, 8, 0), "little")
        info = json.loads(os.pread(fd, length, 8))[key]
        begin, end = info["data_offsets"]
        table = torch.empty(info["shape"], dtype=torch.bfloat16)
        view = memoryview(table.view(torch.uint8).numpy()).cast("B")
        offset, done = 8 + length + begin, 0
        while done < end - begin:
            n = os.preadv(fd, [view[done : done + _CHUNK]], offset + done)
            if n <= 0:
                raise OSError(f"short read at {offset + done}")
            done += n
    finally:
        os.close(fd)
    return table


# --------------------------------------------------------------------------- /proc readers


def read_status(pid: int | str = "self") -> dict[str, int]:
    """RssAnon, RssFile, VmRSS, VmHWM of a process, in bytes."""
    text = Path(f"/proc/{pid}/status").read_text()
    found = dict(re.findall(r"^(\w+):\s+(\d+) kB", text, re.M))
    return {k: int(found[k]) * 1024 for k in _STATUS_KEYS if k in found}


def read_io() -> dict[str, int]:
    """/proc/self/io counters."""
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = int(value)
    return out


def resident_pages(path: Path) -> bytes:
    """One byte per page of ``path``: bit 0 set when resident in the page cache (mincore)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    libc.mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    if size == 0:
        return b""
    page = mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            pages = (size + page - 1) // page
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return bytes(b & 1 for b in vec.raw)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def newly_cached(before: bytes, after: bytes, start: int = 0, stop: int | None = None) -> int:
    """Bytes that became resident between two bitmaps, within [start, stop) of the file."""
    page = mmap.PAGESIZE
    first, last = start // page, len(after) if stop is None else -(-stop // page)
    return (
        sum(1 for b, a in zip(before[first:last], after[first:last], strict=True) if a and not b)
        * page
    )


def tensor_range(shard: Path, key: str) -> tuple[int, int]:
    """[start, stop) byte offsets of ``key``'s data in a safetensors file."""
    with shard.open("rb") as fh:
        length = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(length))
    begin, end = header[key]["data_offsets"]
    return 8 + length + begin, 8 + length + end


def header_pages(shard: Path) -> int:
    """Bytes of the whole pages that hold the safetensors header (8-byte length + JSON)."""
    with shard.open("rb") as fh:
        length = int.from_bytes(fh.read(8), "little")
    return -(-(8 + length) // mmap.PAGESIZE) * mmap.PAGESIZE


def evict(path: Path) -> None:
    """Drop this file's clean pages from the page cache (after flushing dirty ones)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read_ahead_kb(dev: int) -> str:
    """read_ahead_kb of the block device holding ``dev`` (or "unknown")."""
    try:
        text = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/queue/read_ahead_kb")
        if not text.exists():  # a partition: its parent disk has the queue
            text = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/../queue/read_ahead_kb")
        return text.read_text().strip()
    except OSError:
        return "unknown"


# --------------------------------------------------------------------------- the checkpoint


def write_checkpoint(root: Path, hidden: int, vocab: int) -> dict[str, Any]:
    """Write the 7B-like layout into ``root``; return the tensor map and sizes."""
    import torch
    from safetensors.torch import save_file

    from embedbench.omni import families

    family = families.default()

    gen = torch.Generator().manual_seed(7451)
    mlp = hidden * 37 // 7  # 18944 for hidden 3584 (Qwen2.5-7B intermediate size)

    def bits(*shape: int) -> torch.Tensor:
        """Random bf16 bit patterns (random bytes: no compressible or sparse files)."""
        raw = torch.randint(-(2**15), 2**15, shape, generator=gen, dtype=torch.int16)
        return raw.view(torch.bfloat16)

    shards = [
        {"thinker.audio_tower.layers.0.fc1.weight": bits(mlp // 2, hidden)},
        {
            "thinker.audio_tower.proj.weight": bits(mlp, hidden),
            EMBEDDING_KEY: bits(vocab, hidden),
            "thinker.model.layers.0.mlp.gate_proj.weight": bits(mlp, hidden),
            "thinker.model.layers.0.mlp.up_proj.weight": bits(mlp, hidden),
        },
        {"thinker.model.layers.1.mlp.down_proj.weight": bits(hidden, mlp // 2)},
        {"thinker.model.norm.weight": bits(hidden), "thinker.lm_head.bias": bits(8)},
    ]
    weight_map: dict[str, str] = {}
    sizes: dict[str, int] = {}
    total = 0
    count = len(shards)
    for number in range(1, count + 1):
        tensors = shards[number - 1]
        name = f"model-{number:05d}-of-{count:05d}.safetensors"
        save_file(tensors, str(root / name), metadata={"format": "pt"})
        for key, t in tensors.items():
            weight_map[key] = name
            sizes[key] = t.numel() * t.element_size()
            total += sizes[key]
        shards[number - 1] = {}
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    config = {
        "architectures": [family.architecture],
        "model_type": family.model_type,
        "thinker_config": {
            **family.token_ids,
            "text_config": {"hidden_size": hidden, "vocab_size": vocab, "torch_dtype": "bfloat16"},
        },
    }
    (root / "config.json").write_text(json.dumps(config, indent=2))
    for shard in sorted(root.glob("*.safetensors")):
        evict(shard)
    return {"weight_map": weight_map, "sizes": sizes, "table_bytes": sizes[EMBEDDING_KEY]}


# --------------------------------------------------------------------------- the child


def child(mode: str, model_dir: Path) -> None:
    """Run one loading mode and print one JSON line (called in a fresh interpreter)."""
    import torch  # noqa: F401  (imports are not part of the measured operation)
    from safetensors.torch import load_file

    from embedbench.omni import checkpoint

    shard = (
        model_dir
        / json.loads((model_dir / "model.safetensors.index.json").read_text())["weight_map"][
            EMBEDDING_KEY
        ]
    )
    before_status, before_io = read_status(), read_io()
    t0 = time.perf_counter()
    if mode == "embedbench":
        facts = checkpoint.read_thinker_facts(model_dir)
        location = checkpoint.locate_embedding(model_dir, facts)
        held: Any = checkpoint.load_embedding_table(location)
        materialized = held.numel() * held.element_size()
    elif mode == "load_file":
        held = load_file(shard)
        materialized = 0
    elif mode == "load_file+clone":
        mapped = load_file(shard)
        held = {k: v.clone() for k, v in mapped.items()}
        del mapped
        materialized = sum(v.numel() * v.element_size() for v in held.values())
    elif mode == "load_file pread":
        held = load_file(shard, backend="pread")
        materialized = sum(v.numel() * v.element_size() for v in held.values())
    elif mode == "exact pread (prototype)":
        held = exact_read(shard, EMBEDDING_KEY)
        materialized = held.numel() * held.element_size()
    else:
        raise SystemExit(f"unknown mode {mode}")
    wall = time.perf_counter() - t0
    after_status, after_io = read_status(), read_io()
    print(
        json.dumps(
            {
                "mode": mode,
                "wall_s": wall,
                "before": before_status,
                "after": after_status,
                "io": {k: after_io[k] - before_io[k] for k in ("rchar", "read_bytes")},
                "materialized_bytes": materialized,
            }
        ),
        flush=True,
    )
    del held


def run_child(mode: str, model_dir: Path, core: int | None) -> dict[str, Any]:
    """Spawn a fresh interpreter for ``mode``; sample its RssAnon every 2 ms from here."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(model_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    if core is not None:
        os.sched_setaffinity(proc.pid, {core})
    peak = {"RssAnon": 0, "VmRSS": 0}
    while proc.poll() is None:
        try:
            st = read_status(proc.pid)
        except (OSError, KeyError):
            break
        for k in peak:
            peak[k] = max(peak[k], st.get(k, 0))
        time.sleep(0.002)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"child {mode} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_sampled"] = peak
    return result


# --------------------------------------------------------------------------- measure


@dataclass
class Measured:
    """What one invocation measured: the checkpoint's layout and every child run."""

    hidden: int
    repeats: int
    modes: list[str]
    caches: list[str]
    table_bytes: int
    shard_name: str
    shard_bytes: int
    write_s: float
    sizes: dict[str, int]
    weight_map: dict[str, str]
    allowed_outside: int
    read_ahead_kb: str
    runs: list[dict[str, Any]] = field(default_factory=list)


def measure(args: argparse.Namespace, core: int | None) -> Measured:
    """Write the checkpoint, run every mode × cache × repeat in a child, then remove it."""
    repeats = 1 if args.quick else args.repeats
    root = Path(tempfile.mkdtemp(prefix="embedbench-loading-", dir=args.dir))
    root_dev = root.stat().st_dev
    try:
        t0 = time.perf_counter()
        layout = write_checkpoint(root, args.hidden, C.VOCAB_7B)
        write_s = time.perf_counter() - t0
        shard_name = layout["weight_map"][EMBEDDING_KEY]
        shard = root / shard_name
        shard_files = sorted(root.glob("*.safetensors"))
        table_range = tensor_range(shard, EMBEDDING_KEY)
        # The header must be read, and the table's first and last pages are shared with
        # its neighbours: that much outside the table's range is unavoidable.
        data = Measured(
            hidden=args.hidden,
            repeats=repeats,
            modes=list(args.modes),
            caches=list(args.caches),
            table_bytes=layout["table_bytes"],
            shard_name=shard_name,
            shard_bytes=sum(
                v for k, v in layout["sizes"].items() if layout["weight_map"][k] == shard_name
            ),
            write_s=write_s,
            sizes=layout["sizes"],
            weight_map=layout["weight_map"],
            allowed_outside=header_pages(shard) + 2 * mmap.PAGESIZE,
            read_ahead_kb=_read_ahead_kb(root_dev),
        )
        for mode in args.modes:
            for cache in args.caches:
                for r in range(repeats):
                    if cache == "cold":
                        for f in shard_files:
                            evict(f)
                    elif r == 0:
                        run_child(mode, root, core)  # make this mode's pages warm
                    before = {f.name: resident_pages(f) for f in shard_files}
                    res = run_child(mode, root, core)
                    after = {f.name: resident_pages(f) for f in shard_files}
                    res["cache"] = cache
                    res["repeat"] = r + 1
                    res["newly_cached"] = sum(newly_cached(before[n], after[n]) for n in before)
                    res["newly_cached_in_table"] = newly_cached(
                        before[shard_name], after[shard_name], *table_range
                    )
                    res["newly_cached_other_shards"] = sum(
                        newly_cached(before[n], after[n]) for n in before if n != shard_name
                    )
                    data.runs.append(res)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return data


# --------------------------------------------------------------------------- tabulate


def summarize(data: Measured) -> list[dict[str, Any]]:
    """One row per mode × cache: medians of the runs (peaks and other shards: maxima)."""
    summary: list[dict[str, Any]] = []
    for mode in data.modes:
        for cache in data.caches:
            group = [r for r in data.runs if r["mode"] == mode and r["cache"] == cache]
            peak_anon = max(max(g["peak_sampled"]["RssAnon"], g["after"]["RssAnon"]) for g in group)
            base_anon = C.median([g["before"]["RssAnon"] for g in group])
            summary.append(
                {
                    "mode": mode,
                    "cache": cache,
                    "wall_s": C.median([g["wall_s"] for g in group]),
                    "peak_rss_anon": peak_anon,
                    "peak_rss_anon_delta": peak_anon - base_anon,
                    "vmhwm": max(g["after"]["VmHWM"] for g in group),
                    "read_bytes": C.median([g["io"]["read_bytes"] for g in group]),
                    "rchar": C.median([g["io"]["rchar"] for g in group]),
                    "paged_in": C.median([g["newly_cached"] for g in group]),
                    "paged_in_outside_table": C.median(
                        [g["newly_cached"] - g["newly_cached_in_table"] for g in group]
                    ),
                    "other_shards_paged_in": max(g["newly_cached_other_shards"] for g in group),
                    "materialized": group[0]["materialized_bytes"],
                }
            )
    return summary


def tabulate(data: Measured, summary: list[dict[str, Any]]) -> list[C.Section]:
    """The loading table (with its note) and the cold-cache targets table."""
    gb = 1e9
    table = data.table_bytes
    rows = [
        [
            row["mode"],
            row["cache"],
            f"{row['wall_s']:.3f}",
            f"{row['peak_rss_anon'] / gb:.3f} ({row['peak_rss_anon'] / table:.2f}×)",
            f"{row['peak_rss_anon_delta'] / gb:.3f}",
            f"{row['vmhwm'] / gb:.3f}",
            f"{row['read_bytes'] / gb:.3f}",
            f"{row['rchar'] / gb:.3f}",
            f"{row['paged_in'] / gb:.3f}",
            f"{row['paged_in_outside_table'] / 1e6:.1f}",
            f"{row['materialized'] / gb:.3f}",
        ]
        for row in summary
    ]
    table_md = C.markdown_table(
        [
            "mode",
            "cache",
            "wall (s)",
            "peak RssAnon (GB, × table)",
            "peak RssAnon − before (GB)",
            "VmHWM (GB)",
            "read_bytes (GB)",
            "rchar (GB)",
            "newly cached (GB)",
            "of it outside the table (MB)",
            "materialized (GB)",
        ],
        rows,
        align="llrrrrrrrrr",
    )
    verdicts = []
    for mode in ("embedbench", "exact pread (prototype)"):
        cold = next((x for x in summary if x["mode"] == mode and x["cache"] == "cold"), None)
        if cold is None:
            continue
        outside = cold["paged_in_outside_table"]
        only = outside <= data.allowed_outside and cold["other_shards_paged_in"] == 0
        verdicts.append(
            [
                f"{mode}: only the embedding's bytes read",
                f"newly cached {cold['paged_in'] / gb:.3f} GB (read_bytes "
                f"{cold['read_bytes'] / gb:.3f} GB) for a {table / gb:.3f} GB table in a "
                f"{data.shard_bytes / gb:.3f} GB shard; outside the table's byte range "
                f"{outside / 1e6:.3f} MB ({100 * outside / table:.2f} %), other shards "
                f"{cold['other_shards_paged_in'] / 1e6:.1f} MB",
                f"outside ≤ header + boundary pages ({data.allowed_outside / 1e3:.0f} kB)",
                C.fmt(only),
            ]
        )
        ratio = cold["peak_rss_anon"] / table
        base = cold["peak_rss_anon"] - cold["peak_rss_anon_delta"]
        verdicts.append(
            [
                f"{mode}: peak RssAnon ≤ 1.3 × table",
                f"{cold['peak_rss_anon'] / gb:.3f} GB = {ratio:.2f} × table, of which "
                f"{base / gb:.3f} GB interpreter + torch before loading "
                f"(loading itself: {cold['peak_rss_anon_delta'] / table:.2f} × table)",
                "≤ 1.30",
                C.fmt(ratio <= 1.3),
            ]
        )
    verdict_md = C.markdown_table(["target", "measured", "wanted", "met"], verdicts, align="llll")
    note = (
        f"Checkpoint: 4 shards, embedding 152064 × {data.hidden} bf16 = {table / gb:.3f} GB in "
        f"{data.shard_name} ({data.shard_bytes / gb:.3f} GB with its neighbours), written in "
        f"{data.write_s:.1f} s. {data.repeats} run(s) per row (median; peaks are maxima), each "
        "in a fresh interpreter pinned to the chosen core; the parent samples the child's "
        "RssAnon every 2 ms. VmHWM counts mapped page-cache pages too, so a clone out of a "
        "mapping shows ~2 × table there while RssAnon holds ~1 ×. read_bytes is 0 when the "
        "pages come from the page cache (warm), and a virtio disk may be served from the "
        f"host's cache even when cold here. Kernel readahead of the disk: {data.read_ahead_kb} KB."
    )
    return [
        C.Section("Loading the embedding table vs the whole shard", table_md, note),
        C.Section("Loading targets (cold cache)", verdict_md),
    ]


# --------------------------------------------------------------------------- write


def json_fields(data: Measured, summary: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's own JSON fields (next to the session's machine and load)."""
    return {
        "hidden": data.hidden,
        "table_bytes": data.table_bytes,
        "shard_bytes": data.shard_bytes,
        "write_s": data.write_s,
        "sizes": data.sizes,
        "weight_map": data.weight_map,
        "runs": data.runs,
        "summary": summary,
    }


# --------------------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
        return
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per mode and cache state")
    p.add_argument("--hidden", type=int, default=C.HIDDEN_7B)
    p.add_argument("--dir", help="parent of the temporary checkpoint (default: system temp)")
    p.add_argument("--keep", action="store_true", help="keep the checkpoint directory")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--caches", nargs="+", choices=("cold", "warm"), default=["cold", "warm"])
    args = p.parse_args()
    if args.quick:
        args.hidden = 512 if args.hidden == C.HIDDEN_7B else args.hidden
        if args.modes == list(MODES):
            args.modes = ["embedbench", "load_file pread"]
    session = C.Session("loading", args)
    data = measure(args, session.core)
    summary = summarize(data)
    C.publish(session, tabulate(data, summary), json_fields(data, summary))


if __name__ == "__main__":
    main()
