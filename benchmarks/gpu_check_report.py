"""The part of gpu_check.md that `embedbench report` does not print, for one run directory.

``python benchmarks/gpu_check_report.py RUN_DIR`` prints, in markdown: the device and the
schema check of the run's files (one line each), the timer floor of the timed path, one
row per case with the SM clock's range over its timed blocks (flagged below
``CLOCK_FLAG_SHARE`` of the maximum) and the syncs torch reports, what a flagged clock
does to the reading, and the PR's own table. benchmarks/gpu_check.sh runs it after the
run; it needs numpy and embedbench's torch-free modules, not torch
(docs/archive/PERFORMANCE-2026-11.md, "7. GPU check").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedbench.cases import CASE_LABELS, SYNC_LABEL
from embedbench.omni import families

TIMED_SCOPE = "whole_wrapper"
TIMER_CASE = "timer"
# A case whose timed blocks saw the SM clock below this share of its maximum is flagged.
CLOCK_FLAG_SHARE = 0.8
CLOCK_NOTE = (
    "The baseline's host latency waits for two lookups' kernels (the `.cpu()` copy and the "
    "merge's blocking index copy), the fixed form's for one. A lower SM clock lengthens "
    "those kernels, so it adds to the baseline twice and to the fixed form once: a case "
    "read while the clock was low shows a larger saving than at full clock, and a clock "
    "that changed between workers widens the spread of the workers' savings (and so the "
    "interval). Read a flagged case's saving as clock-dependent, not as the fix's alone."
)


def _load(run_dir: Path, name: str) -> Any:
    return json.loads((run_dir / name).read_text())


def clock_maximum(
    metadata: dict[str, Any], records: Sequence[dict[str, Any]]
) -> tuple[float | None, str]:
    """The SM clock's maximum to compare with, and where it comes from: NVML's maximum SM
    clock of the device when the run recorded it, else the highest reading of the run."""
    nvml = (metadata.get("provenance") or {}).get("device", {}).get("nvml") or {}
    if nvml.get("source") == "nvml" and nvml.get("sm_clock_max_mhz"):
        return float(nvml["sm_clock_max_mhz"]), "the GPU's maximum SM clock (NVML)"
    reads = [r for rec in records for r in _clock_reads(rec)]
    if reads:
        return max(reads), "the highest SM clock read in this run (NVML gave no maximum)"
    return None, "no SM clock was read (not CUDA, or NVML unavailable)"


def _clock_reads(record: dict[str, Any]) -> list[float]:
    return [float(record[k]) for k in ("gpu_mhz_start", "gpu_mhz_end") if record.get(k) is not None]


def case_rows(
    metadata: dict[str, Any],
    records: Sequence[dict[str, Any]],
    validation: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Per case and length: the SM clock's min and max over its timed blocks (every
    worker, both variants), whether it fell below ``CLOCK_FLAG_SHARE`` of the maximum,
    and the syncs torch reports per variant (from its validation row)."""
    maximum, _ = clock_maximum(metadata, records)
    timed = [r for r in records if r.get("scope") == TIMED_SCOPE]
    rows = []
    for row in validation:
        case, tokens = row["case"], row["tokens"]
        reads = [
            read
            for rec in timed
            if rec["case"] == case and rec["tokens"] == tokens
            for read in _clock_reads(rec)
        ]
        low = min(reads) if reads else None
        rows.append(
            {
                "case": case,
                "tokens": tokens,
                "clock_min_mhz": low,
                "clock_max_mhz": max(reads) if reads else None,
                "clock_flagged": bool(
                    low is not None and maximum and low < CLOCK_FLAG_SHARE * maximum
                ),
                "device_syncs": row.get("device_syncs") or {},
                "device_syncs_label": row.get("device_syncs_label", SYNC_LABEL),
            }
        )
    return rows


def _syncs(counts: dict[str, Any]) -> str:
    if not counts or all(counts.get(v) is None for v in ("baseline", "fixed")):
        return "n/a (not CUDA)"
    return f"{counts.get('baseline')} / {counts.get('fixed')}"


def case_table(
    metadata: dict[str, Any],
    records: Sequence[dict[str, Any]],
    validation: Sequence[dict[str, Any]],
) -> list[str]:
    """The per-case lines of gpu_check.md: the table, what the clock is compared with, and
    (when a case is flagged, or always on CUDA) what a low clock does to the reading."""
    rows = case_rows(metadata, records, validation)
    maximum, source = clock_maximum(metadata, records)
    label = rows[0]["device_syncs_label"] if rows else SYNC_LABEL
    lines = [
        "| Input | tokens | SM clock over its timed blocks (MHz, min–max) | "
        f"below {CLOCK_FLAG_SHARE:.0%} of the maximum | {label} (baseline / fixed) |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for row in rows:
        if row["clock_min_mhz"] is None:
            clock, flag = "n/a", "n/a"
        else:
            clock = f"{row['clock_min_mhz']:.0f}–{row['clock_max_mhz']:.0f}"
            flag = "**yes: clock-dependent saving**" if row["clock_flagged"] else "no"
        lines.append(
            f"| {CASE_LABELS.get(row['case'], row['case'])} | {row['tokens']} | {clock} | {flag} | "
            f"{_syncs(row['device_syncs'])} |"
        )
    lines.append("")
    if maximum is None:
        lines.append(f"SM clock: {source}.")
    else:
        flagged = [f"{r['case']}@{r['tokens']}" for r in rows if r["clock_flagged"]]
        lines.append(
            f"SM clock: NVML's reading at each timed block's start and end; the maximum is "
            f"{maximum:.0f} MHz, {source}; flagged: {', '.join(flagged) or 'none'}."
        )
        lines += ["", CLOCK_NOTE]
    return lines


def floor_table(metadata: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[str]:
    """Median, p5 and p95 of the empty call through the timed path, per clock."""
    floor = [s for r in records if r["case"] == TIMER_CASE for s in r["samples_us"]]
    lines = ["| clock | median (µs) | p5 (µs) | p95 (µs) |", "| --- | ---: | ---: | ---: |"]
    for i, name in enumerate(metadata["metric_order"]):
        values = np.array([s[i] for s in floor])
        p5, p50, p95 = np.percentile(values, [5, 50, 95])
        lines.append(f"| {name} | {p50:.3f} | {p5:.3f} | {p95:.3f} |")
    return lines


def pr_table() -> list[str]:
    """The PR's H100 table, as the PR printed it (its family's, in the registry)."""
    ref = families.with_reference_table().reference_table
    lines = [
        f"#### The PR's table ({ref['environment']['gpu']}, {ref['tokens']} tokens, "
        "real checkpoint)",
        "",
        "| Input | Before (μs) | After (μs) | Host latency reduction |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in ref["rows"]:
        lines.append(
            f"| {row['label']} | {row['before_us']:.2f} | {row['after_us']:.2f} | "
            f"{row['reduction_pct']:.2f}% |"
        )
    return lines


def render(run_dir: Path) -> str:
    """Everything this module prints for ``run_dir`` (see the module doc)."""
    meta = _load(run_dir, "metadata.json")
    records = _load(run_dir, "micro-raw.json")
    validation = _load(run_dir, "validation.json")
    lines = [
        f"- device_name: {meta.get('device_name')}; cpu core {meta.get('cpu_core')}; "
        f"status {meta.get('status')}; synthetic {meta.get('synthetic')}; "
        f"{meta.get('processes')} worker process(es)",
        f"- schema check: {meta.get('schema_check', 'not recorded (an older run)')}",
        "",
        "#### Timer floor (empty call through the timed path, with both device syncs)",
        "",
        *floor_table(meta, records),
        "",
        "#### Per case: the SM clock and the syncs",
        "",
        *case_table(meta, records, validation),
        "",
        *pr_table(),
        "",
        "#### This machine (embedbench report)",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Print ``render`` of the one run directory given; exit 2 with one line otherwise."""
    if len(argv) != 1 or not (Path(argv[0]) / "metadata.json").is_file():
        print("gpu_check_report: pass one run directory (with metadata.json)", file=sys.stderr)
        return 2
    print(render(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
