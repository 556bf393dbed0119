"""Several runs side by side: loading and naming them, the before/after table per family
with short run keys and its legend, the row-wise difference of runs of one
configuration, and the PR's published table to set beside them.

The compare notebook's tables; ``figuredata.compare_table`` and
``static.compare_reductions`` draw the figure from the same functions. One run's tables
are ``tables``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from embedbench.cases import CASE_LABELS, CASES
from embedbench.config import parse_list
from embedbench.errors import ConfigError
from embedbench.harness import stats, windows
from embedbench.omni import families
from embedbench.report.hostprose import host_verdict
from embedbench.report.results import RunResult, load_results
from embedbench.report.tables import (
    _fmt_us,
    _reduction_text,
    _several_lengths,
    _utc_iso,
    checkpoint_kind,
    family_label,
    family_of,
    input_label,
    ordered_rows,
    pr_statistic,
    run_label,
    table_order,
    timing_window,
)

__all__ = [
    "CONFIGURATION_FIELDS",
    "HOST_SPEED_EXPLAINS",
    "REFERENCE_KEY",
    "MixedWindowsError",
    "by_family",
    "canary_ratio",
    "compare_table",
    "compare_tables",
    "compared_windows",
    "configuration",
    "difference_table",
    "differences",
    "load_runs",
    "lookup_bytes",
    "median_worker_canary_us",
    "reference_name",
    "reference_results",
    "regime_caption",
    "run_keys",
    "runs_table",
    "same_configuration_pairs",
    "series_label",
]


def reference_results() -> dict[str, Any]:
    """The PR's published H100 table (its family's, in the registry): a fresh copy."""
    return copy.deepcopy(dict(families.with_reference_table().reference_table or {}))


class MixedWindowsError(ConfigError):
    """Runs timed with different windows would be put side by side unlabelled."""


def reference_name(reference: dict[str, Any]) -> str:
    """The column label of the PR's published table."""
    return f"PR {families.with_reference_table().pr} ({reference['environment']['gpu']})"


def compared_windows(
    runs: dict[str, RunResult],
    reference: dict[str, Any] | None = None,
    *,
    allow_mixed: bool = False,
) -> dict[str, str]:
    """The timing window of every compared run (and of the PR's table: the PR's window).

    Raises ``MixedWindowsError`` when they differ and ``allow_mixed`` is false: host
    latencies from different windows differ by the clock reads' cost, so a table of
    them must say so (``allow_mixed=True`` labels every column with its window).
    """
    seen = {name: timing_window(result.metadata) for name, result in runs.items()}
    if reference is not None:
        seen[reference_name(reference)] = str(reference.get("timing_window", windows.PR))
    if len(set(seen.values())) > 1 and not allow_mixed:
        listing = ", ".join(f"{name}: {window}" for name, window in seen.items())
        raise MixedWindowsError(
            f"the runs were timed with different windows ({listing}), so their latencies "
            f"differ by where the clock reads sit; compare runs of one window, or pass "
            f"allow_mixed_windows=True to show them side by side labelled with their windows"
        )
    return seen


def series_label(name: str, seen: dict[str, str]) -> str:
    """``name``, with its window appended when the compared windows differ."""
    return f"{name} [{seen[name]} window]" if len(set(seen.values())) > 1 else name


REFERENCE_KEY = "PR"


def run_keys(
    runs: Mapping[str, RunResult], reference: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """A short key per compared run (A, B, …, AA after Z) and ``PR`` for the PR's table:
    a comparison table's column groups carry the key, the runs table (``runs_table``)
    names each run once beside it."""
    keys = {}
    for i, name in enumerate(runs):
        key, n = "", i
        while True:
            key = chr(ord("A") + n % 26) + key
            n = n // 26 - 1
            if n < 0:
                break
        keys[name] = key
    if reference is not None:
        keys[reference_name(dict(reference))] = REFERENCE_KEY
    return keys


def compare_table(
    runs: dict[str, RunResult],
    reference: dict[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
    keys: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Before, after and reduction per case, one column group per run (and the PR's),
    headed by the run's short key (``run_keys``, or ``keys`` to keep one key per run
    across tables; ``runs_table`` is their legend); the reduction is the PR's
    1 − After/Before of each row, in every design, as in ``pr_table``.

    Refuses runs timed with different windows unless ``allow_mixed_windows``, which
    labels every column group with its window (``compared_windows``).
    """
    seen = compared_windows(runs, reference, allow_mixed=allow_mixed_windows)
    keys = dict(keys) if keys is not None else run_keys(runs, reference)
    windows_of = {keys[name]: window for name, window in seen.items()}
    columns: dict[str, dict[str, str]] = {}
    for name, result in runs.items():
        several = _several_lengths(result.summary)
        label_of = series_label(keys[name], windows_of)
        for row in ordered_rows(result):
            label = input_label(row["case"], row["tokens"], several)
            host = row.get("host_us") or {}
            columns.setdefault(f"{label_of}: before (μs)", {})[label] = _fmt_us(
                host.get("baseline")
            )
            columns.setdefault(f"{label_of}: after (μs)", {})[label] = _fmt_us(host.get("fixed"))
            columns.setdefault(f"{label_of}: reduction", {})[label] = _reduction_text(
                row, pr_statistic(row)
            )
    if reference is not None:
        name = series_label(keys[reference_name(reference)], windows_of)
        for row in reference["rows"]:
            label = row["label"]
            columns.setdefault(f"{name}: before (μs)", {})[label] = _fmt_us(row["before_us"])
            columns.setdefault(f"{name}: after (μs)", {})[label] = _fmt_us(row["after_us"])
            columns.setdefault(f"{name}: reduction", {})[label] = f"{row['reduction_pct']:.2f}%"
    frame = pd.DataFrame(columns).fillna("—")
    frame.index.name = "Input"
    return frame


def by_family(runs: dict[str, RunResult]) -> dict[str, dict[str, RunResult]]:
    """The runs grouped by family label, in the order each family first appears: the
    families' wrappers differ, so their reductions are never put in one table."""
    groups: dict[str, dict[str, RunResult]] = {}
    for name, result in runs.items():
        groups.setdefault(family_label(result.metadata), {})[name] = result
    return groups


def compare_tables(
    runs: dict[str, RunResult],
    reference: dict[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> dict[str, pd.DataFrame]:
    """``compare_table`` per family (label → table), each run under one key in all of
    them (``run_keys``). The PR's published table sits beside its own family's runs
    only."""
    tables_by_family = {}
    reference_label = families.with_reference_table().label
    keys = run_keys(runs, reference)
    mixed = {"allow_mixed_windows": allow_mixed_windows, "keys": keys}
    for label, group in by_family(runs).items():
        own = reference if label == reference_label else None
        tables_by_family[label] = compare_table(group, own, **mixed)
    if reference is not None and reference_label not in tables_by_family:
        tables_by_family[reference_label] = compare_table({}, reference, **mixed)
    return tables_by_family


def load_runs(directories: Any, *, include_reference: bool) -> dict[str, RunResult]:
    """Load output dirs for comparison, keyed by a short unique name: the run's device,
    target and checkpoint kind (``run_label``), then its directory where that repeats.

    Two or more are needed, or one when the PR's reference table is included.
    """
    paths = [str(p) for p in parse_list("results_dirs", directories)]
    needed = 1 if include_reference else 2
    if len(paths) < needed:
        raise ConfigError(
            f"results_dirs needs at least {needed} run dirs, got {len(paths)}; "
            'pass e.g. -y "results_dirs: [runA, runB]"'
        )
    loaded = [load_results(path) for path in paths]
    labels = [run_label(result) for result in loaded]
    runs: dict[str, RunResult] = {}
    for path, label, result in zip(paths, labels, loaded, strict=True):
        directory = result.directory.name or path
        name = label if labels.count(label) == 1 else f"{label} · {directory}"
        while name in runs:
            directory = f"{result.directory.parent.name}/{directory}"
            name = f"{label} · {directory}"
        runs[name] = result
    return runs


def runs_table(runs: dict[str, RunResult], reference: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per compared run (and the PR's table, when given): its short key in the
    comparison tables (``run_keys``; the legend that names each run once), where and how
    it was measured."""
    keys = run_keys(runs, reference)
    rows = []
    for name, result in runs.items():
        m = result.metadata
        rows.append(
            {
                "run": name,
                "key": keys[name],
                "family": family_label(m),
                "device": f"{m.get('device')} ({m.get('device_name')})",
                "target": m.get("target"),
                "checkpoint": checkpoint_kind(m),
                "directory": str(result.directory),
                "design": f"{m.get('blocks')}×{m.get('iterations')} (warmup {m.get('warmup')})",
                "workers": m.get("processes", 1),
                "timing window": timing_window(m),
                "host": host_verdict(m),
                "status": m.get("status"),
                "started": _utc_iso(m.get("start_time")),
            }
        )
    if reference is not None:
        env, method = reference.get("environment") or {}, reference.get("method") or {}
        rows.append(
            {
                "run": reference_name(reference),
                "key": REFERENCE_KEY,
                "family": families.with_reference_table().label,
                "device": f"cuda ({env.get('gpu')})",
                "target": "the PR's published table",
                "checkpoint": f"real ({env.get('model')})",
                "directory": "—",
                "design": f"{method.get('blocks')}×{method.get('iterations')} "
                f"(warmup {method.get('warmup')})",
                "workers": "—",
                "timing window": str(reference.get("timing_window", windows.PR)),
                "host": "—",
                "status": "published",
                "started": env.get("date"),
            }
        )
    return pd.DataFrame(rows).set_index("run")


_ITEM_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


def lookup_bytes(metadata: dict[str, Any]) -> int | None:
    """Bytes one lookup of the run's longest length copies (None when not recorded)."""
    shape = metadata.get("embedding_shape") or []
    lengths = metadata.get("lengths") or []
    item = _ITEM_BYTES.get(str(metadata.get("dtype")))
    if len(shape) != 2 or not lengths or item is None:
        return None
    return max(int(t) for t in lengths) * int(shape[1]) * item


def _reductions(result: RunResult) -> dict[str, float]:
    """Each valid case's reduction at the run's first length."""
    rows = [r for r in result.summary if r.get("valid") and r.get("reduction_pct") is not None]
    if not rows:
        return {}
    tokens = min(r["tokens"] for r in rows)
    return {r["case"]: float(r["reduction_pct"]) for r in rows if r["tokens"] == tokens}


def regime_caption(
    runs: dict[str, RunResult], reference: dict[str, Any] | None = None
) -> str | None:
    """A caption for a comparison where CPU rows sit beside GPU rows (None otherwise):
    the CPU's lookup copy dominates its call, so the two measure different regimes."""
    cpu = {n: r for n, r in runs.items() if r.metadata.get("device") == "cpu"}
    gpu = {
        n: _reductions(r)
        for n, r in runs.items()
        if r.metadata.get("device") not in ("cpu", None, "unknown")
    }
    if reference is not None:
        gpu[reference_name(reference)] = {r["case"]: r["reduction_pct"] for r in reference["rows"]}
    if not cpu or not gpu:
        return None
    cpu_name = max(cpu, key=lambda n: lookup_bytes(cpu[n].metadata) or 0)
    size = lookup_bytes(cpu[cpu_name].metadata)
    if size is None:
        copies = "each lookup copies the embedding rows of every token, which dominates the call"
    else:
        tokens = max(int(t) for t in cpu[cpu_name].metadata["lengths"])
        copies = f"each lookup of {tokens} tokens copies {size / 1e6:.1f} MB"
        copies += (
            ", which dominates the call"
            if size >= 1e6
            else " here (8.4 MB at the 7B's 1172 tokens × 3584 bf16, where it dominates the call)"
        )
    gpu_name, gpu_values = next(iter(gpu.items()))
    cpu_values = _reductions(cpu[cpu_name])
    shared = [c for c in CASES if c in cpu_values and c in gpu_values]
    example = ""
    if shared:
        case = "audio" if "audio" in shared else shared[0]
        example = (
            f" ({CASE_LABELS.get(case, case)}: {cpu_values[case]:.1f} % on {cpu_name}, "
            f"{gpu_values[case]:.1f} % on {gpu_name})"
        )
    return (
        f"CPU rows sit beside GPU rows: on CPU {copies}, so CPU and GPU reductions of the "
        f"same case{example} measure "
        "different regimes. Read each against runs of its own device."
    )


# A run's configuration for a difference: what must match for two runs' reductions to
# measure the same thing (the machine, the day and the design may differ).
CONFIGURATION_FIELDS = ("device", "target", "synthetic", "embedding_shape", "dtype", "lm_shim")


def configuration(result: RunResult) -> tuple[Any, ...]:
    """The fields that must match for two runs to be differenced (plus the window and
    the family)."""
    m = result.metadata
    values = [json.dumps(m.get(name), sort_keys=True) for name in CONFIGURATION_FIELDS]
    return (*values, timing_window(m), family_of(m))


def same_configuration_pairs(runs: dict[str, RunResult]) -> list[tuple[str, str]]:
    """(first, other) for every run that shares its configuration with an earlier one:
    each is differenced against the first run of its configuration."""
    first: dict[tuple[Any, ...], str] = {}
    pairs = []
    for name, result in runs.items():
        key = configuration(result)
        if key in first:
            pairs.append((first[key], name))
        else:
            first[key] = name
    return pairs


def _row_difference(
    a: dict[str, Any] | None, b: dict[str, Any] | None
) -> stats.ReductionDifference | str:
    """The difference of two summary rows, or why there is none."""
    if a is None or b is None or not a.get("valid") or not b.get("valid"):
        return "not measured in both"
    units_a, units_b = a.get("worker_reduction_pct"), b.get("worker_reduction_pct")
    if not units_a or not units_b or len(units_a) < 2 or len(units_b) < 2:
        return "n/a: needs a between-process interval (2+ workers) in both runs"
    return stats.reduction_difference(units_a, units_b)


def differences(
    runs: dict[str, RunResult],
) -> list[dict[str, Any]]:
    """Row-wise differences of runs of the same configuration (``same_configuration_pairs``):
    per case and length, the other run's reduction minus the first's, with a 95 % interval.

    Each entry: ``a``, ``b`` (run names), ``case``, ``tokens`` and ``difference``
    (a ``stats.ReductionDifference``, or a string saying why there is none).
    """
    found = []
    for name_a, name_b in same_configuration_pairs(runs):
        a, b = runs[name_a], runs[name_b]
        keys = {(r["case"], r["tokens"]) for r in (*a.summary, *b.summary)}
        for case, tokens in sorted(keys, key=lambda k: table_order(*k)):
            found.append(
                {
                    "a": name_a,
                    "b": name_b,
                    "case": case,
                    "tokens": tokens,
                    "difference": _row_difference(
                        a.summary_row(case, tokens), b.summary_row(case, tokens)
                    ),
                }
            )
    return found


def median_worker_canary_us(metadata: dict[str, Any]) -> float | None:
    """The run's canary level: the median of its workers' median canary read (µs), or None
    when the run recorded no canary."""
    workers = (metadata.get("host_stability") or {}).get("workers") or []
    levels = [w["median_us"] for w in workers if w.get("median_us")]
    return float(np.median(levels)) if levels else None


# Two runs whose canaries differ by more than this may differ by the host's speed alone.
# A reduction is the host's at the speed it was measured: on the CI machine, over 39 runs,
# the multimodal cases' reductions rose 0.4–1.0 pp for every 10 % the host ran slower,
# a large share of their 1.2–2.6 pp between-run SD (docs/archive/PERFORMANCE-2026-11.md,
# "Interference").
HOST_SPEED_EXPLAINS = 0.10


def canary_ratio(
    a: RunResult, b: RunResult, case: str | None = None, tokens: int | None = None
) -> float | None:
    """Run B's canary level over run A's: for one case and length where both rows carry
    ``canary_us``, else the runs' levels (None unless both recorded one)."""
    if case is not None:
        row_a, row_b = a.summary_row(case, tokens), b.summary_row(case, tokens)
        level_a = (row_a or {}).get("canary_us")
        level_b = (row_b or {}).get("canary_us")
        if level_a and level_b:
            return float(level_b) / float(level_a)
    level_a, level_b = median_worker_canary_us(a.metadata), median_worker_canary_us(b.metadata)
    return level_b / level_a if level_a and level_b else None


def _difference_reading(diff: stats.ReductionDifference, ratio: float | None) -> str:
    if not diff.excludes_zero:
        return "no detectable difference"
    if ratio is not None and abs(ratio - 1.0) > HOST_SPEED_EXPLAINS:
        return (
            f"the runs differ, and so does the host's speed (canary {100 * (ratio - 1):+.0f} %):"
            " the host may explain the difference"
        )
    return "the runs differ"


def difference_table(runs: dict[str, RunResult]) -> pd.DataFrame:
    """``differences`` as a table: one row per pair of runs and case (empty when no two
    runs share a configuration), with the runs' canary ratio beside it."""
    entries = differences(runs)
    several = len({e["tokens"] for e in entries}) > 1
    rows = []
    for entry in entries:
        diff = entry["difference"]
        measured = isinstance(diff, stats.ReductionDifference)
        ratio = canary_ratio(runs[entry["a"]], runs[entry["b"]], entry["case"], entry["tokens"])
        rows.append(
            {
                "Input": input_label(entry["case"], entry["tokens"], several),
                "Runs (B − A)": f"{entry['b']} − {entry['a']}",
                "Difference (pp)": f"{diff.difference_pp:+.2f}" if measured else "n/a",
                "95 % interval (pp)": f"[{diff.low:+.2f}, {diff.high:+.2f}]" if measured else diff,
                "Canary B/A": "n/a" if ratio is None else f"{ratio:.2f}",
                "Reading": _difference_reading(diff, ratio) if measured else "",
            }
        )
    columns = [
        "Input",
        "Runs (B − A)",
        "Difference (pp)",
        "95 % interval (pp)",
        "Canary B/A",
        "Reading",
    ]
    return pd.DataFrame(rows, columns=columns)
