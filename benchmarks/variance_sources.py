"""Where the between-run spread comes from: processes, placement, huge pages, heap, writeback.

Fresh child processes (``python benchmarks/variance_sources.py --child MODE``), run one
after another on one pinned core, each measuring the reference target on the embedded
default (audio, image and mixed at 1172 tokens, 50 warm-ups, 20 × 20, one process, as
``processes=1`` does) several times in a row (sub-runs). Modes, interleaved so that
slow drifts of the machine hit them alike:

- ``plain``: the table as ``run`` loads it; every sub-run reuses it;
- ``fresh-table``: a fresh copy of the table for every sub-run (new physical placement
  inside the same process);
- ``thp``: the table in 2 MiB-aligned memory advised for transparent huge pages;
- ``churn``: before measuring, the heap is churned with 2000 allocations of random
  sizes (a different allocation history).

Per mode and case: the SD of the reduction between sub-runs of one process (what an
interval inside one process could see), the SD between processes of their mean (what it
cannot), the process-level component ``sqrt(max(0, SD_between² − SD_within² / m))``,
and the mean 95 % half-width of one sub-run's within-process interval.

A second table measures writeback: runs right after 1 GiB was written to a file without
``fsync`` (the state a fresh clone's first run met: the checkpoint just built) against
runs after ``sync``, alternating.

``--quick``: 2 processes per mode, 2 sub-runs, 6 blocks × 5 calls, one case, no
writeback table.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import math
import mmap
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C

MODES = ("plain", "fresh-table", "thp", "churn")
CASES = ("audio", "image", "mixed")
HUGE = 2 * 2**20
MADV_HUGEPAGE = 14


def _thp_table(shape: tuple[int, int]) -> Any:
    """An empty bf16 tensor in 2 MiB-aligned anonymous memory advised for huge pages."""
    import torch

    nbytes = shape[0] * shape[1] * 2
    buf = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    offset = (-address) % HUGE
    libc = ctypes.CDLL(None)
    libc.madvise(ctypes.c_void_p(address + offset), ctypes.c_size_t(nbytes), MADV_HUGEPAGE)
    table = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=offset)
    table = table.view(torch.bfloat16).view(*shape)
    table._embedbench_mapping = buf  # keep the mapping alive with the tensor
    return table


def _churn_heap(seed: int) -> None:
    import random

    rng = random.Random(seed)
    kept = []
    for _ in range(2000):
        kept.append(bytearray(rng.randint(1, 4 * 2**20)))
        if len(kept) > 40:
            kept.pop(rng.randrange(len(kept)))


def child(mode: str, subruns: int, design: dict[str, int], cases: list[str], core: int) -> None:
    """One fresh process: load, measure ``subruns`` times, print one JSON line."""
    from embedbench.harness import devices
    from embedbench.harness.isolation import isolated
    from embedbench.harness.timing import derive_seed, measure_pair
    from embedbench.omni import checkpoint, synthetic
    from embedbench.omni.scenarios import build_scenario, call_variant
    from embedbench.omni.targets.reference import build_reference_target
    from embedbench.report.summary import summarize_records

    model = synthetic.default_synthetic_checkpoint(progress=lambda m: None)
    facts = checkpoint.read_thinker_facts(model)
    location = checkpoint.locate_embedding(model, facts)
    if mode == "thp":
        original_empty = checkpoint.torch.empty
        checkpoint.torch.empty = lambda shape, dtype: _thp_table(tuple(shape))
        table = checkpoint.load_embedding_table(location)
        checkpoint.torch.empty = original_empty
    else:
        table = checkpoint.load_embedding_table(location)
    if mode == "churn":
        _churn_heap(os.getpid())
    out: dict[str, Any] = {"mode": mode, "placement": devices.memory_placement(table), "sub": []}
    with isolated(core):
        for sub in range(subruns):
            current = table.clone() if mode == "fresh-table" and sub else table
            target = build_reference_target(current, facts)
            row = {}
            for case in cases:
                scenario = build_scenario(
                    case, 1172, token_ids=facts, hidden_size=facts.hidden_size, tag=target.tag
                )
                calls = {
                    name: functools.partial(call_variant, target.variants[name], scenario)
                    for name in ("baseline", "fixed")
                }
                records = measure_pair(
                    calls,
                    case=case,
                    tokens=1172,
                    seed=derive_seed(sub, case),
                    device="cpu",
                    **design,
                )
                pair = summarize_records([r.to_json() for r in records])
                low, high = pair.reduction_ci95_pct
                row[case] = {"reduction": pair.reduction_pct, "half_width": (high - low) / 2}
            out["sub"].append(row)
            del target, current
    print(json.dumps(out))


def _spawn(mode: str, args: Any, core: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--cpu-core", str(core)]
    if args.quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _decomposition(results: list[dict[str, Any]], cases: list[str]) -> list[list[Any]]:
    rows = []
    for mode in MODES:
        runs = [r for r in results if r["mode"] == mode]
        if not runs:
            continue
        for case in cases:
            per_process = [[s[case]["reduction"] for s in r["sub"]] for r in runs]
            m = len(per_process[0])
            within = math.sqrt(sum(C.sd(p) ** 2 for p in per_process) / len(per_process))
            means = [sum(p) / m for p in per_process]
            between = C.sd(means)
            component = math.sqrt(max(0.0, between**2 - within**2 / m))
            half = [s[case]["half_width"] for r in runs for s in r["sub"]]
            rows.append(
                [
                    mode,
                    case,
                    len(runs),
                    m,
                    sum(means) / len(means),
                    within,
                    between,
                    component,
                    sum(half) / len(half),
                ]
            )
    return rows


def _writeback(args: Any, core: int, session: C.Session) -> list[list[Any]]:
    """Runs right after writing 1 GiB without fsync, against runs after sync."""
    from embedbench.omni.synthetic import synthetic_cache_dir

    scratch = synthetic_cache_dir()  # the disk the embedded default's checkpoint is built on
    rows = []
    for condition in ("after 1 GiB unsynced", "after sync") * 3:
        with tempfile.NamedTemporaryFile(dir=scratch) as handle:
            if condition.startswith("after 1"):
                chunk = os.urandom(64 * 2**20)
                for _ in range(16):
                    handle.write(chunk)
                handle.flush()
            else:
                os.sync()
            dirty = _dirty_mib()
            t0 = time.perf_counter()
            result = _spawn("plain", args, core)
            rows.append([condition, dirty, _dirty_mib(), time.perf_counter() - t0, result])
        os.sync()
    return rows


def _dirty_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Dirty:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _design(quick: bool) -> tuple[dict[str, int], list[str]]:
    design = (
        {"warmup": 5, "blocks": 6, "iterations": 5}
        if quick
        else {"warmup": 50, "blocks": 20, "iterations": 20}
    )
    return design, ["audio"] if quick else list(CASES)


def measure(args: argparse.Namespace, session: C.Session) -> dict[str, Any]:
    """The child processes of every mode, interleaved; then the writeback runs."""
    design, cases = _design(args.quick)
    processes = 2 if args.quick else args.processes
    results = []
    for i in range(processes):
        for mode in MODES:
            print(f"process {i + 1}/{processes}: {mode}", file=sys.stderr, flush=True)
            results.append(_spawn(mode, args, session.core))
    placements = {
        mode: sorted({r["placement"]["anon_huge_kb"] for r in results if r["mode"] == mode})
        for mode in MODES
    }
    data: dict[str, Any] = {"design": design, "cases": cases}
    data.update(results=results, placements=placements)
    if not args.quick and not args.no_writeback:
        data["writeback"] = _writeback(args, session.core, session)
    return data


def _writeback_table(rows: list[Any], cases: list[str]) -> str:
    headers = ["condition", "Dirty at start (MiB)", "Dirty at end (MiB)", "wall (s)"]
    cells = [
        [
            cond,
            start,
            end,
            wall,
            *(
                " / ".join(
                    f"{s[c]['reduction']:.1f} (±{s[c]['half_width']:.2f})" for s in res["sub"]
                )
                for c in cases
            ),
        ]
        for cond, start, end, wall, res in rows
    ]
    return C.markdown_table(
        [*headers, *(f"{c} reduction % (half-width)" for c in cases)],
        cells,
        align="lrrr" + "l" * len(cases),
    )


def tabulate(data: dict[str, Any]) -> list[C.Section]:
    """The within/between-process decomposition, and the writeback table if measured."""
    headers = [
        *("mode", "case", "processes", "sub-runs each", "mean reduction %"),
        *("SD within a process (pp)", "SD between processes (pp)", "process-level SD (pp)"),
        "mean half-width of one sub-run (pp)",
    ]
    table = C.markdown_table(
        headers, _decomposition(data["results"], data["cases"]), align="llrrrrrrr"
    )
    sections = [
        C.Section(
            "Spread within and between processes",
            table,
            f"Design per sub-run: {data['design']}, 1172 tokens, one process; modes interleaved.",
        )
    ]
    if "writeback" in data:
        sections.append(
            C.Section(
                "Writeback: runs right after 1 GiB was written without fsync, against after sync",
                _writeback_table(data["writeback"], data["cases"]),
                "Each row: one fresh process, its sub-runs separated by ' / '.",
            )
        )
    return sections


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--child", choices=MODES, help=argparse_hidden())
    p.add_argument("--processes", type=int, default=8, help="child processes per mode")
    p.add_argument("--subruns", type=int, default=3, help="sub-runs per process")
    p.add_argument("--no-writeback", action="store_true", help="skip the writeback table")
    args = p.parse_args()
    if args.child:
        design, cases = _design(args.quick)
        subruns = 2 if args.quick else args.subruns
        child(args.child, subruns, design, cases, args.cpu_core or 0)
        return
    session = C.Session("variance_sources", args)
    data = measure(args, session)
    fields = ("results", "placements", "writeback")
    C.publish(session, tabulate(data), {k: data[k] for k in fields if k in data})


def argparse_hidden() -> str:
    """Help of the internal --child flag."""
    return "internal: run one child process of the given mode"


if __name__ == "__main__":
    main()
