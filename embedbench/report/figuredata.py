"""The data of each figure, apart from its drawing: one pure function per figure.

Each function takes a run (or runs) and returns a tidy ``pandas.DataFrame``, one row per
drawn thing (a block, a block half's edge, a call, a case's interval). The static
renderer (``static``, matplotlib) and the interactive one (``interactive``, Vega-Lite)
both draw from these tables, so the PNG and the chart cannot disagree; nothing here
imports matplotlib or knows about JavaScript (docs/interactive.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from embedbench.cases import CASE_LABELS, VARIANTS
from embedbench.harness import stats
from embedbench.harness.timing import METRIC_ORDER
from embedbench.report import compare, tables
from embedbench.report.results import RunResult

__all__ = [
    "CALL_COLUMNS",
    "COMPARE_COLUMNS",
    "EDGE_COLUMNS",
    "FOREST_COLUMNS",
    "HIGH_PERCENTILE",
    "HOST",
    "LOW_PERCENTILE",
    "PAIRED_COLUMNS",
    "RANGE_PAD",
    "REACH_FLOOR_PP",
    "REACH_SPAN",
    "REACH_WIDTHS",
    "SPAN_COLUMNS",
    "axis_range",
    "call_range",
    "call_table",
    "case_calls",
    "case_keys",
    "case_paired",
    "compare_table",
    "diagnostics",
    "edge_table",
    "forest_table",
    "forest_workers",
    "off_scale",
    "outlier_worker_reasons",
    "paired_table",
    "worker_medians",
    "worker_spans",
]

PAIRED_COLUMNS = (
    *("case", "label", "tokens", "order", "block", "worker", "first"),
    *("baseline_us", "fixed_us", "reduction_pct", "outlier", "frequency_flag"),
    *("outlier_worker", "worker_reason", "flags", "wall_s", "cpu_mhz", "gpu_mhz", "canary_us"),
)
EDGE_COLUMNS = (
    *("case", "label", "tokens", "block", "worker", "variant", "edge"),
    *("wall_s", "cpu_mhz", "gpu_mhz", "canary_us", "frequency_flag"),
)
CALL_COLUMNS = ("case", "label", "tokens", "variant", "block", "worker", "call", "host_us")
LOW_PERCENTILE = 0.5
HIGH_PERCENTILE = 99.0
HOST = METRIC_ORDER.index("host_observed_us")
COMPARE_COLUMNS = ("series", "case", "label", "tokens", "reduction_pct", "low", "high")
FOREST_COLUMNS = (
    *("case", "label", "tokens", "reduction_pct", "low", "high", "verdict", "reading"),
    *("method", "aa_low", "aa_high"),
)


def _none_if_nan(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


def diagnostics(result: RunResult, case: str, tokens: int) -> dict[str, Any]:
    """The diagnostics of one case's summary row ({} when none)."""
    row = result.summary_row(case, tokens) or {}
    return row.get("diagnostics") or {}


def case_keys(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """The (case, tokens) pairs of ``frame``, in table order."""
    keys = {(c, int(t)) for c, t in zip(frame["case"], frame["tokens"], strict=True)}
    return sorted(keys, key=lambda k: tables.table_order(*k))


def _edge_mean(pair: pd.DataFrame, prefix: str) -> float | None:
    values = pd.concat([pair[f"{prefix}_start"], pair[f"{prefix}_end"]]).dropna()
    return float(values.astype(float).mean()) if len(values) else None


def _excursions(result: RunResult, sub: pd.DataFrame, case: str, tokens: int) -> set[int]:
    """The blocks of one case the diagnostics flag for a frequency excursion (their
    indices count every block recorded, complete or not)."""
    flagged = (diagnostics(result, case, tokens).get("frequency") or {}).get("flagged") or []
    blocks = sorted(set(sub["block"]))
    return {int(blocks[i]) for i in flagged if i < len(blocks)}


def outlier_worker_reasons(result: RunResult, case: str, tokens: int) -> dict[int, str]:
    """The workers the diagnostics flag as outliers in one case (their own reduction
    unsupported by the others'), each with its likely reason ({} when none)."""
    found = diagnostics(result, case, tokens).get("outlier_workers") or {}
    reasons = found.get("reasons") or {}
    return {int(w): str(reasons.get(str(w), "")) for w in found.get("flagged") or []}


def _case_blocks(
    result: RunResult, sub: pd.DataFrame, case: str, tokens: int, t0: float
) -> list[dict[str, Any]]:
    """One case's complete blocks in time order, with their diagnostic flags."""
    diag = diagnostics(result, case, tokens)
    outliers = set((diag.get("outliers") or {}).get("flagged") or [])
    excursions = _excursions(result, sub, case, tokens)
    odd_workers = outlier_worker_reasons(result, case, tokens)
    rows: list[dict[str, Any]] = []
    for block, pair in sub.groupby("block", sort=True):
        by_variant = {row["variant"]: row for _, row in pair.iterrows()}
        if set(by_variant) != set(VARIANTS):
            continue
        base, fixed = (float(by_variant[v]["median_host_observed_us"]) for v in VARIANTS)
        positions = {v: by_variant[v]["position"] for v in VARIANTS}
        known = all(_none_if_nan(p) is not None for p in positions.values())
        worker = _none_if_nan(by_variant[VARIANTS[0]]["worker"])
        order = len(rows)
        odd = worker is not None and int(worker) in odd_workers
        flags = [
            name
            for name, on in (
                ("outlier", order in outliers),
                ("frequency", block in excursions),
                ("outlier worker", odd),
            )
            if on
        ]
        rows.append(
            {
                "case": case,
                "label": CASE_LABELS.get(case, case),
                "tokens": tokens,
                "order": order,
                "block": int(block),
                "worker": None if worker is None else int(worker),
                "first": min(positions, key=lambda v: positions[v]) if known else None,
                "baseline_us": base,
                "fixed_us": fixed,
                "reduction_pct": stats.reduction_pct(base, fixed),
                "outlier": order in outliers,
                "frequency_flag": block in excursions,
                "outlier_worker": odd,
                "worker_reason": odd_workers[int(worker)] if odd else None,
                "flags": ", ".join(flags),
                "wall_s": float(pair["wall_start"].min() - t0),
                "cpu_mhz": _edge_mean(pair, "cpu_mhz"),
                "gpu_mhz": _edge_mean(pair, "gpu_mhz"),
                "canary_us": _edge_mean(pair, "canary_us"),
            }
        )
    return rows


def paired_table(result: RunResult) -> pd.DataFrame:
    """One row per complete block of every case and length, in table then time order:
    both halves' medians (µs), the block's reduction, which variant ran first, the worker,
    the diagnostics' flags (outlier, frequency excursion, a block of an outlier worker,
    with that worker's likely reason in ``worker_reason``), and the block's mean MHz and
    canary over its halves' edges. ``order`` is the block's index in its case's time order
    (the x of the paired view); ``wall_s`` its start since the run's first block."""
    frame = tables.blocks_frame(result)
    if frame.empty:
        return pd.DataFrame(columns=list(PAIRED_COLUMNS))
    t0 = float(frame["wall_start"].min())
    rows: list[dict[str, Any]] = []
    for case, tokens in case_keys(frame):
        sub = frame[(frame["case"] == case) & (frame["tokens"] == tokens)]
        rows += _case_blocks(result, sub, case, tokens, t0)
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def case_paired(paired: pd.DataFrame, case: str, tokens: int) -> pd.DataFrame:
    """The rows of one case of ``paired_table``, indexed 0.. in time order."""
    sub = paired[(paired["case"] == case) & (paired["tokens"] == tokens)]
    return sub.reset_index(drop=True)


SPAN_COLUMNS = (
    *("case", "label", "tokens", "worker", "start", "end", "blocks", "shade"),
    *("outlier_worker", "worker_reason"),
)


def worker_spans(paired: pd.DataFrame) -> pd.DataFrame:
    """One row per run of consecutive blocks (in time order) of one worker, per case and
    length of ``paired_table``: its first and last ``order``, its block count, whether
    it is shaded (every other span, so neighbours differ; cases with a single worker get
    none) and whether its worker is an outlier (with the reason)."""
    rows: list[dict[str, Any]] = []
    for case, tokens in case_keys(paired) if len(paired) else []:
        sub = case_paired(paired, case, tokens)
        spans: list[dict[str, Any]] = []
        for _, block in sub.iterrows():
            worker = _none_if_nan(block["worker"])
            if worker is None:
                continue
            if spans and spans[-1]["worker"] == worker and spans[-1]["end"] == block["order"] - 1:
                spans[-1]["end"] = int(block["order"])
                spans[-1]["blocks"] += 1
                continue
            spans.append(
                {
                    "case": case,
                    "label": block["label"],
                    "tokens": tokens,
                    "worker": int(worker),
                    "start": int(block["order"]),
                    "end": int(block["order"]),
                    "blocks": 1,
                    "shade": len(spans) % 2 == 0,
                    "outlier_worker": bool(block["outlier_worker"]),
                    "worker_reason": block["worker_reason"],
                }
            )
        if len({s["worker"] for s in spans}) > 1:
            rows += spans
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS))


def edge_table(result: RunResult) -> pd.DataFrame:
    """One row per edge (start, end) of every block half: when it was read (s since the
    run's first block) and what was read there (CPU MHz, GPU MHz, canary µs; None where
    the run recorded none), with the half's case, block, worker and variant, and whether
    the diagnostics flag its block for a frequency excursion."""
    frame = tables.blocks_frame(result)
    if frame.empty:
        return pd.DataFrame(columns=list(EDGE_COLUMNS))
    t0 = float(frame["wall_start"].min())
    excursions = {
        (case, tokens, block)
        for case, tokens in case_keys(frame)
        for block in _excursions(
            result, frame[(frame["case"] == case) & (frame["tokens"] == tokens)], case, tokens
        )
    }
    rows = []
    for _, half in frame.iterrows():
        worker = _none_if_nan(half["worker"])
        key = (half["case"], int(half["tokens"]), int(half["block"]))
        for edge in ("start", "end"):
            rows.append(
                {
                    "case": half["case"],
                    "label": half["label"],
                    "tokens": int(half["tokens"]),
                    "block": int(half["block"]),
                    "worker": None if worker is None else int(worker),
                    "variant": half["variant"],
                    "edge": edge,
                    "wall_s": float(half[f"wall_{edge}"] - t0),
                    **{
                        column: _none_if_nan(half[f"{column}_{edge}"])
                        for column in ("cpu_mhz", "gpu_mhz", "canary_us")
                    },
                    "frequency_flag": key in excursions,
                }
            )
    edges = pd.DataFrame(rows, columns=list(EDGE_COLUMNS))
    for column in ("cpu_mhz", "gpu_mhz", "canary_us"):
        edges[column] = pd.to_numeric(edges[column], errors="coerce")
    return edges


def worker_medians(result: RunResult) -> pd.DataFrame:
    """Each worker's median canary and the wall-time span of its blocks (s since the run's
    first block), from the host-stability reading (empty when the run has none)."""
    frame = tables.blocks_frame(result)
    reading = result.metadata.get("host_stability") or {}
    rows = []
    if not frame.empty:
        t0 = float(frame["wall_start"].min())
        for worker in reading.get("workers") or []:
            sub = frame[frame["worker"] == worker["worker"]]
            if sub.empty:
                continue
            rows.append(
                {
                    "worker": int(worker["worker"]),
                    "start_s": float(sub["wall_start"].min() - t0),
                    "end_s": float(sub["wall_end"].max() - t0),
                    "median_us": float(worker["median_us"]),
                }
            )
    return pd.DataFrame(rows, columns=["worker", "start_s", "end_s", "median_us"])


def call_table(result: RunResult) -> pd.DataFrame:
    """Every timed call of every case and length: its host latency (µs), variant, block,
    worker and index in its block."""
    rows = []
    for record in tables._micro_records(result):
        worker = _none_if_nan(record.get("worker"))
        for call, sample in enumerate(record["samples_us"]):
            rows.append(
                (
                    record["case"],
                    CASE_LABELS.get(record["case"], record["case"]),
                    int(record["tokens"]),
                    record["variant"],
                    int(record["block"]),
                    None if worker is None else int(worker),
                    call,
                    float(sample[HOST]),
                )
            )
    return pd.DataFrame(rows, columns=list(CALL_COLUMNS))


def case_calls(calls: pd.DataFrame, case: str, tokens: int | None = None) -> pd.DataFrame:
    """The rows of one case of ``call_table`` (its first length when ``tokens`` is None)."""
    sub = calls[calls["case"] == case]
    if tokens is None and len(sub):
        tokens = int(sub["tokens"].min())
    return sub[sub["tokens"] == tokens].reset_index(drop=True)


def call_range(calls: pd.DataFrame) -> tuple[float, float]:
    """The plotted range of per-call latencies: the lowest variant's 0.5th percentile to
    the highest variant's 99th."""
    data = [calls.loc[calls["variant"] == v, "host_us"].to_numpy() for v in VARIANTS]
    data = [d for d in data if d.size]
    return (
        float(min(np.percentile(d, LOW_PERCENTILE) for d in data)),
        float(max(np.percentile(d, HIGH_PERCENTILE) for d in data)),
    )


# The x range of an interval figure reaches past the estimates (and 0) by this many typical
# interval widths, or this share of the estimates' own span, or this many points, the most
# of the three; an interval end beyond it is off scale (drawn as an arrow with its number).
REACH_WIDTHS = 3.0
REACH_SPAN = 0.5
REACH_FLOOR_PP = 5.0
RANGE_PAD = 0.04


def axis_range(frame: pd.DataFrame) -> tuple[float, float]:
    """The x range of an interval figure (``forest_table``, ``compare_table``): every
    estimate and 0, and each interval up to a reach that one wild interval (a quick run's
    −15772 % lower end) cannot stretch, so the other cases keep their width; padded."""
    points = frame["reduction_pct"].dropna().astype(float)
    ends = frame[["low", "high"]].dropna().astype(float)
    core_lo, core_hi = min([*points, 0.0]), max([*points, 0.0])
    widths = (ends["high"] - ends["low"]).to_numpy()
    typical = float(np.median(widths)) if widths.size else 0.0
    reach = max(REACH_WIDTHS * typical, REACH_SPAN * (core_hi - core_lo), REACH_FLOOR_PP)
    lo = max(min([*ends["low"], core_lo]), core_lo - reach)
    hi = min(max([*ends["high"], core_hi]), core_hi + reach)
    pad = RANGE_PAD * (hi - lo)
    return lo - pad, hi + pad


def off_scale(frame: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """The interval ends of ``frame`` outside ``[lo, hi]``: one row per end, with its row's
    index, which side (``low`` or ``high``) and its value."""
    rows = [
        {"row": i, "side": side, "value": float(v)}
        for i, low, high in zip(frame.index, frame["low"], frame["high"], strict=True)
        for side, v, out in (
            ("low", low, not pd.isna(low) and low < lo),
            ("high", high, not pd.isna(high) and high > hi),
        )
        if out
    ]
    return pd.DataFrame(rows, columns=["row", "side", "value"])


def forest_table(result: RunResult) -> pd.DataFrame:
    """One row per valid case with an interval, in table order: the headline reduction,
    the verdict's interval, the verdict, its label, the interval's method, and the A/A
    interval where there is one (None otherwise)."""
    rows = [r for r in result.summary if r.get("valid") and r.get("reduction_ci95_pct")]
    rows.sort(key=lambda r: tables.table_order(r["case"], r["tokens"]))
    out = []
    for row in rows:
        aa = (row.get("aa") or {}).get("reduction_ci95_pct") or [None, None]
        low, high = row["reduction_ci95_pct"]
        out.append(
            {
                "case": row["case"],
                "label": CASE_LABELS.get(row["case"], row["case"]),
                "tokens": int(row["tokens"]),
                "reduction_pct": float(row["reduction_pct"]),
                "low": float(low),
                "high": float(high),
                "verdict": row.get("verdict"),
                "reading": tables.reduction_label(row),
                "method": tables.interval_method(row),
                "aa_low": aa[0],
                "aa_high": aa[1],
            }
        )
    return pd.DataFrame(out, columns=list(FOREST_COLUMNS))


def forest_workers(result: RunResult) -> pd.DataFrame:
    """Each worker's own reduction per valid case (the units of the t interval)."""
    rows = []
    for row in result.summary:
        units = row.get("worker_reduction_pct") or []
        if not (row.get("valid") and row.get("reduction_ci95_pct")) or len(units) < 2:
            continue
        for worker, value in enumerate(units):
            rows.append(
                {
                    "case": row["case"],
                    "label": CASE_LABELS.get(row["case"], row["case"]),
                    "tokens": int(row["tokens"]),
                    "worker": worker,
                    "reduction_pct": float(value),
                }
            )
    return pd.DataFrame(rows, columns=["case", "label", "tokens", "worker", "reduction_pct"])


def compare_table(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> pd.DataFrame:
    """One row per valid case of each run (and of the PR's table, last, with no
    interval), in the runs' order: its series label (with its timing window when windows
    are mixed), the reduction and the verdict's interval (None where there is none).
    Runs timed in different windows are refused unless ``allow_mixed_windows``."""
    seen = compare.compared_windows(
        dict(runs), dict(reference) if reference else None, allow_mixed=allow_mixed_windows
    )
    rows = []
    for name, result in runs.items():
        series = compare.series_label(name, seen)
        for row in result.summary:
            if not row.get("valid") or row.get("reduction_pct") is None:
                continue
            ci = row.get("reduction_ci95_pct") or [None, None]
            label = CASE_LABELS.get(row["case"], row["case"])
            reduction = float(row["reduction_pct"])
            rows.append((series, row["case"], label, int(row["tokens"]), reduction, *ci[:2]))
    if reference is not None:
        series = compare.series_label(compare.reference_name(dict(reference)), seen)
        tokens = int(reference.get("tokens"))
        for row in reference["rows"]:
            label = CASE_LABELS.get(row["case"], row["case"])
            rows.append(
                (series, row["case"], label, tokens, float(row["reduction_pct"]), None, None)
            )
    return pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))
