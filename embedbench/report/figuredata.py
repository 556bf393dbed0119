"""The data of each figure, apart from its drawing: one pure function per table.

Each function takes a run (or runs, or a table built here) and returns a tidy
``pandas.DataFrame``, one row per drawn thing (a block, a block half, a worker's span, a
violin's outline point, a case's interval, an interval end past the axis), holding every
value a mark needs: positions, trend lines, densities, box statistics, per-worker
reductions, axis limits. The static renderer (``static``, matplotlib) and the interactive
one (``interactive``, Vega-Lite) only map these columns to marks and may pick rows (a
menu's case, a drawn flag), never compute a value, so the PNG and the chart cannot
disagree (``tests/test_interactive.py`` checks it, mark by mark); nothing here imports
matplotlib or knows about JavaScript (docs/interactive.md). The statistics a figure adds
(a Theil–Sen trend, a KDE, box statistics) come from ``figurestats``. The tables start
from the run's block medians (``blocks_frame``), its calls (``call_table``), its summary
(``forest_table``) or its per-call ledger (``disagreement_table``, ``operator_table``);
beside them are the case the per-call view shows (``detail_case``) and a row's reading in
words (``reduction_label``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from embedbench.cases import CASE_LABELS, CASES, VARIANTS
from embedbench.harness import stats
from embedbench.harness.timing import METRIC_ORDER, MICRO_SCOPE
from embedbench.report import compare, figurestats, tables, work
from embedbench.report.results import RunResult

__all__ = [
    "BLOCK_JITTER",
    "BOX_COLUMNS",
    "BOX_WIDTH",
    "CALL_AXIS_COLUMNS",
    "CALL_COLUMNS",
    "COMPARE_COLUMNS",
    "DETAIL_REASON",
    "DIAGONAL_COLUMNS",
    "DIFFERENCE",
    "DISAGREEMENT_COLUMNS",
    "EDGE_COLUMNS",
    "FOREST_COLUMNS",
    "HALF_COLUMNS",
    "HIGH_PERCENTILE",
    "HOST",
    "INSIDE_SHARE",
    "LOG_SCALE_SPAN",
    "LOW_PERCENTILE",
    "MEASURES",
    "MEDIAN_COLUMNS",
    "NOT_RECORDED",
    "OFF_SCALE_COLUMNS",
    "OPERATOR_CASE_COLUMNS",
    "OPERATOR_COLUMNS",
    "OPERATOR_REACH",
    "PAIRED_COLUMNS",
    "PAIR_FIELDS",
    "RANGE_PAD",
    "REACH_FLOOR_PP",
    "REACH_SPAN",
    "REACH_WIDTHS",
    "RING_COLUMN",
    "RUNS",
    "SPAN_COLUMNS",
    "TRACE_COLUMNS",
    "VIOLIN_COLUMNS",
    "WHISKER_COLUMNS",
    "axis_range",
    "block_boxes",
    "block_halves",
    "block_whiskers",
    "blocks_frame",
    "call_axes",
    "call_medians",
    "call_range",
    "call_table",
    "call_violins",
    "case_calls",
    "case_keys",
    "case_paired",
    "compare_table",
    "detail_case",
    "diagnostics",
    "diagonal_table",
    "disagreement_table",
    "edge_table",
    "forest_table",
    "forest_workers",
    "off_scale",
    "operator_cases",
    "operator_table",
    "outlier_worker_reasons",
    "paired_findings",
    "paired_table",
    "reduction_label",
    "trace_table",
    "worker_medians",
    "worker_spans",
]

PAIRED_COLUMNS = (
    *("case", "label", "tokens", "order", "block", "worker", "first", "first_label"),
    *("baseline_us", "fixed_us", "reduction_pct", "outlier", "frequency_flag"),
    *("outlier_worker", "worker_reason", "flags", "wall_s", "cpu_mhz", "gpu_mhz", "canary_us"),
    *("worker_reduction_pct", "headline_pct", "trend_pct", "baseline_drift_us"),
    "order_effect_pct",
)
EDGE_COLUMNS = (
    *("case", "label", "tokens", "block", "worker", "variant", "edge"),
    *("wall_s", "cpu_mhz", "gpu_mhz", "canary_us", "frequency_flag"),
)
CALL_COLUMNS = ("case", "label", "tokens", "variant", "block", "worker", "call", "host_us", "x")
LOW_PERCENTILE = 0.5
HIGH_PERCENTILE = 99.0
HOST = METRIC_ORDER.index("host_observed_us")
RUNS, DIFFERENCE = "runs", "difference"  # the two panels of the compare figure
COMPARE_COLUMNS = (
    *("panel", "series", "run", "case", "label", "tokens", "input"),
    *("reduction_pct", "low", "high", "differs", "a", "b"),
)
FOREST_COLUMNS = (
    *("case", "label", "tokens", "input", "reduction_pct", "low", "high", "verdict"),
    *("reading", "method", "aa_low", "aa_high"),
)
NOT_RECORDED = "not recorded"  # ``first_label`` of a block whose run order is unknown


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


def _micro_records(result: RunResult) -> list[dict[str, Any]]:
    return [r for r in result.records if r.get("scope") == MICRO_SCOPE]


def blocks_frame(result: RunResult) -> pd.DataFrame:
    """One row per (case, tokens, variant, block): block medians of each metric, MHz, times."""
    rows = []
    for record in _micro_records(result):
        samples = np.asarray(record["samples_us"], dtype=float)
        medians = np.median(samples, axis=0) if samples.size else [np.nan] * len(METRIC_ORDER)
        rows.append(
            {
                "case": record["case"],
                "label": CASE_LABELS.get(record["case"], record["case"]),
                "tokens": record["tokens"],
                "variant": record["variant"],
                "block": record["block"],
                "position": record.get("position"),
                "worker": record.get("worker"),
                **{
                    f"median_{name}": float(v)
                    for name, v in zip(METRIC_ORDER, medians, strict=True)
                },
                "wall_start": record["wall_start"],
                "wall_end": record["wall_end"],
                "cpu_mhz_start": record.get("cpu_mhz_start"),
                "cpu_mhz_end": record.get("cpu_mhz_end"),
                "gpu_mhz_start": record.get("gpu_mhz_start"),
                "gpu_mhz_end": record.get("gpu_mhz_end"),
                "canary_us_start": record.get("canary_us_start"),
                "canary_us_end": record.get("canary_us_end"),
            }
        )
    return pd.DataFrame(rows)


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


def _drift_drawn(diag: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the paired view draws the reduction's trend and the baseline's block
    medians: the drift diagnostic detected, and that series' own p below its alpha."""
    drift = diag.get("drift") or {}
    if not drift.get("detected"):
        return False, False
    alpha = drift.get("alpha", stats.ALPHA)
    p_d, p_b = drift.get("p_log_ratio"), drift.get("p_baseline")
    return p_d is not None and p_d < alpha, p_b is not None and p_b < alpha


def _order_medians(diag: dict[str, Any]) -> dict[str, float]:
    """Each run order's median reduction where the order effect is detected ({} else)."""
    order = diag.get("order_effect") or {}
    if not order.get("detected"):
        return {}
    values = {v: order.get(f"{v}_first_reduction_pct") for v in VARIANTS}
    return {v: float(value) for v, value in values.items() if value is not None}


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
        first = min(positions, key=lambda v: positions[v]) if known else None
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
                "first": first,
                "first_label": first or NOT_RECORDED,
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
    _add_lines(result, rows, case, tokens)
    return rows


def _add_lines(result: RunResult, rows: list[dict[str, Any]], case: str, tokens: int) -> None:
    """Each block's values of the lines the paired view draws through one case's blocks
    (None where a line is not drawn): its worker's own reduction (the t interval's unit,
    when there are several workers and one reduction each), else the run's reduction; the
    Theil–Sen trend of the reductions and the baseline's block medians where drift is
    detected; its run order's median reduction where an order effect is."""
    summary = result.summary_row(case, tokens) or {}
    diag = diagnostics(result, case, tokens)
    units = summary.get("worker_reduction_pct") or []
    workers = sorted({r["worker"] for r in rows if r["worker"] is not None})
    own = dict(zip(workers, units, strict=True)) if 1 < len(workers) == len(units) else {}
    headline = None if own else _none_if_nan(summary.get("reduction_pct"))
    trend_drawn, baseline_drawn = _drift_drawn(diag)
    trend = (
        figurestats.theil_sen([r["reduction_pct"] for r in rows])
        if trend_drawn and len(rows) > 1
        else None
    )
    medians = _order_medians(diag)
    for i, row in enumerate(rows):
        unit = own.get(row["worker"])
        row["worker_reduction_pct"] = None if unit is None else float(unit)
        row["headline_pct"] = None if headline is None else float(headline)
        row["trend_pct"] = None if trend is None else float(trend[i])
        row["baseline_drift_us"] = row["baseline_us"] if baseline_drawn else None
        row["order_effect_pct"] = medians.get(row["first"] or "")


def paired_table(result: RunResult) -> pd.DataFrame:
    """One row per complete block of every case and length, in table then time order:
    both halves' medians (µs), the block's reduction, which variant ran first (and its
    legend label), the worker, the diagnostics' flags (outlier, frequency excursion, a
    block of an outlier worker, with that worker's likely reason in ``worker_reason``),
    the block's mean MHz and canary over its halves' edges, and its values of the lines
    drawn through the blocks (``_add_lines``). ``order`` is the block's index in its
    case's time order (the x of the paired view); ``wall_s`` its start since the run's
    first block."""
    frame = blocks_frame(result)
    if frame.empty:
        return pd.DataFrame(columns=list(PAIRED_COLUMNS))
    t0 = float(frame["wall_start"].min())
    rows: list[dict[str, Any]] = []
    for case, tokens in case_keys(frame):
        sub = frame[(frame["case"] == case) & (frame["tokens"] == tokens)]
        rows += _case_blocks(result, sub, case, tokens, t0)
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def paired_findings(result: RunResult, case: str, tokens: int) -> list[str]:
    """What the paired view's lines show in one case, in words (its panel's title): the
    drift and the order effect, where ``paired_table`` draws them."""
    diag = diagnostics(result, case, tokens)
    drift = diag.get("drift") or {}
    trend, baseline = _drift_drawn(diag)
    found = []
    if trend:
        way = "falls" if drift["rho_log_ratio"] > 0 else "rises"
        found.append(
            f"drift: reduction {way} (ρ {drift['rho_log_ratio']:.2f}, p {drift['p_log_ratio']:.2g})"
        )
    if baseline:
        way = "rises" if drift["rho_baseline"] > 0 else "falls"
        found.append(
            f"drift: baseline μs {way} (ρ {drift['rho_baseline']:.2f}, p {drift['p_baseline']:.2g})"
        )
    if _order_medians(diag):
        order = diag["order_effect"]
        found.append(
            f"order effect {order['difference_pct_points']:+.1f} pp (p {order['p_value']:.2g})"
        )
    return found


def case_paired(paired: pd.DataFrame, case: str, tokens: int) -> pd.DataFrame:
    """The rows of one case of ``paired_table``, indexed 0.. in time order."""
    sub = paired[(paired["case"] == case) & (paired["tokens"] == tokens)]
    return sub.reset_index(drop=True)


SPAN_COLUMNS = (
    *("case", "label", "tokens", "worker", "start", "end", "blocks", "shade"),
    *("outlier_worker", "worker_reason", "x0", "x1", "mid", "text"),
    *("reduction_pct", "line_x0", "line_x1"),
)
SPAN_PAD, LINE_PAD = 0.5, 0.4  # a span's band and its worker's line reach past its blocks


def worker_spans(paired: pd.DataFrame) -> pd.DataFrame:
    """One row per run of consecutive blocks (in time order) of one worker, per case and
    length of ``paired_table``: its first and last ``order``, its block count, whether
    it is shaded (every other span, so neighbours differ; cases with a single worker get
    none), whether its worker is an outlier (with the reason); its band (``x0``–``x1``),
    its label (``text`` at ``mid``) and its worker's own reduction (None where not drawn)
    as a line from ``line_x0`` to ``line_x1``."""
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
            odd = bool(block["outlier_worker"])
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
                    "outlier_worker": odd,
                    "worker_reason": block["worker_reason"],
                    "text": f"w{int(worker)} outlier" if odd else f"w{int(worker)}",
                    "reduction_pct": _none_if_nan(block.get("worker_reduction_pct")),
                }
            )
        if len({s["worker"] for s in spans}) > 1:
            rows += spans
    for span in rows:
        span["x0"], span["x1"] = span["start"] - SPAN_PAD, span["end"] + SPAN_PAD
        span["mid"] = (span["start"] + span["end"]) / 2
        span["line_x0"], span["line_x1"] = span["start"] - LINE_PAD, span["end"] + LINE_PAD
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS))


# --- the per-block view: each block's halves, boxes, whiskers -----------------------------

HALF_COLUMNS = (
    *("case", "label", "tokens", "order", "block", "worker", "first", "first_label"),
    *("baseline_us", "fixed_us", "reduction_pct", "outlier", "outlier_worker"),
    *("worker_reason", "flags", "cpu_mhz", "gpu_mhz", "canary_us", "half", "us", "x"),
)
BLOCK_JITTER = 0.1  # a block's halves sit this far either side of their variant, at most
JITTER_SEED = 0
BOX_WIDTH = 0.5
BOX_COLUMNS = (
    *("case", "label", "tokens", "variant", "x", "left", "right"),
    *("q1", "median", "q3", "whislo", "whishi"),
)
WHISKER_COLUMNS = (
    *("case", "label", "tokens", "variant", "x", "end", "quartile", "reach"),
    *("cap_left", "cap_right"),
)


def block_halves(paired: pd.DataFrame) -> pd.DataFrame:
    """One row per block half of ``paired_table``: its variant (``half``), its median
    (``us``) and its x, the variant's position (1 baseline, 2 fixed) plus the block's
    jitter (seeded, the same for both halves so the line joining them is level in x),
    with the block's columns for tooltips."""
    rng = np.random.default_rng(JITTER_SEED)
    keep = [c for c in HALF_COLUMNS if c in PAIRED_COLUMNS]
    rows = []
    for case, tokens in case_keys(paired) if len(paired) else []:
        sub = case_paired(paired, case, tokens)
        jitter = rng.uniform(-BLOCK_JITTER, BLOCK_JITTER, size=len(sub))
        for i, block in enumerate(sub[keep].to_dict("records")):
            for x, variant in enumerate(VARIANTS, start=1):
                us = float(block[f"{variant}_us"])
                rows.append({**block, "half": variant, "us": us, "x": x + float(jitter[i])})
    return pd.DataFrame(rows, columns=list(HALF_COLUMNS))


def block_boxes(paired: pd.DataFrame) -> pd.DataFrame:
    """One row per case, length and variant of ``paired_table``: the box of its block
    medians (``figurestats.box``: quartiles, median, whisker ends) at the variant's x,
    ``BOX_WIDTH`` wide (``left``–``right``)."""
    rows = []
    for case, tokens in case_keys(paired) if len(paired) else []:
        sub = case_paired(paired, case, tokens)
        for x, variant in enumerate(VARIANTS, start=1):
            rows.append(
                {
                    "case": case,
                    "label": CASE_LABELS.get(case, case),
                    "tokens": tokens,
                    "variant": variant,
                    "x": float(x),
                    "left": x - BOX_WIDTH / 2,
                    "right": x + BOX_WIDTH / 2,
                    **figurestats.box(sub[f"{variant}_us"].to_numpy(dtype=float)),
                }
            )
    return pd.DataFrame(rows, columns=list(BOX_COLUMNS))


def block_whiskers(boxes: pd.DataFrame) -> pd.DataFrame:
    """Two rows per box of ``block_boxes``: each whisker, from its quartile to its
    ``reach``, and its cap (half the box's width, as matplotlib draws it)."""
    rows = []
    for box in boxes.to_dict("records"):
        for end, quartile, reach in (("low", "q1", "whislo"), ("high", "q3", "whishi")):
            rows.append(
                {
                    **{c: box[c] for c in ("case", "label", "tokens", "variant", "x")},
                    "end": end,
                    "quartile": box[quartile],
                    "reach": box[reach],
                    "cap_left": box["x"] - BOX_WIDTH / 4,
                    "cap_right": box["x"] + BOX_WIDTH / 4,
                }
            )
    return pd.DataFrame(rows, columns=list(WHISKER_COLUMNS))


# --- the edge traces -----------------------------------------------------------------------


def edge_table(result: RunResult) -> pd.DataFrame:
    """One row per edge (start, end) of every block half: when it was read (s since the
    run's first block) and what was read there (CPU MHz, GPU MHz, canary µs; None where
    the run recorded none), with the half's case, block, worker and variant, and whether
    the diagnostics flag its block for a frequency excursion."""
    frame = blocks_frame(result)
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


PAIR_FIELDS = ("order", "baseline_us", "fixed_us", "reduction_pct", "flags")
TRACE_COLUMNS = (*EDGE_COLUMNS, *PAIR_FIELDS, "key", "ring")
RING_COLUMN = "cpu_mhz"  # the trace whose flagged blocks are ringed (an excursion of it)


def trace_table(edges: pd.DataFrame, paired: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows of ``edge_table`` that read ``column``, each with its block's pair from
    ``paired_table`` (``PAIR_FIELDS``; None for an incomplete block), a ``key`` naming
    its block (one segment per block half: key and variant), and ``ring``: the start of
    a half whose block the diagnostics flag for a frequency excursion, in the CPU
    frequency's trace."""
    reads = edges[edges[column].notna()].reset_index(drop=True) if len(edges) else edges
    if reads.empty:
        return pd.DataFrame(columns=list(TRACE_COLUMNS))
    pairs = paired[["case", "tokens", "block", *PAIR_FIELDS]] if len(paired) else None
    if pairs is not None:
        reads = reads.merge(pairs, on=["case", "tokens", "block"], how="left")
    else:
        reads = reads.assign(**{f: None for f in PAIR_FIELDS})
    reads["key"] = [
        f"{c}|{int(t)}|{int(b)}"
        for c, t, b in zip(reads["case"], reads["tokens"], reads["block"], strict=True)
    ]
    flagged = reads["frequency_flag"].astype(bool) & (reads["edge"] == "start")
    reads["ring"] = flagged & (column == RING_COLUMN)
    return reads[list(TRACE_COLUMNS)]


def worker_medians(result: RunResult) -> pd.DataFrame:
    """Each worker's median canary and the wall-time span of its blocks (s since the run's
    first block), from the host-stability reading (empty when the run has none)."""
    frame = blocks_frame(result)
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


# --- every call ----------------------------------------------------------------------------

CALL_JITTER = 0.5  # the calls of a variant spread over this width around its x


def _call_x(variant: str, block: int, call: int) -> float:
    """A call's x: its variant's (1 or 2) plus a spread fixed by its block and index."""
    spread = (block * 7 + call * 13) % 17 / 16 - 0.5
    return VARIANTS.index(variant) + 1 + spread * CALL_JITTER


def call_table(result: RunResult) -> pd.DataFrame:
    """Every timed call of every case and length: its host latency (µs), variant, block,
    worker, index in its block, and its x in the per-call view (``_call_x``)."""
    rows = []
    for record in _micro_records(result):
        worker = _none_if_nan(record.get("worker"))
        block = int(record["block"])
        for call, sample in enumerate(record["samples_us"]):
            rows.append(
                (
                    record["case"],
                    CASE_LABELS.get(record["case"], record["case"]),
                    int(record["tokens"]),
                    record["variant"],
                    block,
                    None if worker is None else int(worker),
                    call,
                    float(sample[HOST]),
                    _call_x(record["variant"], block, call),
                )
            )
    return pd.DataFrame(rows, columns=list(CALL_COLUMNS))


def case_calls(calls: pd.DataFrame, case: str, tokens: int | None = None) -> pd.DataFrame:
    """The rows of one case of ``call_table`` (its first length when ``tokens`` is None)."""
    sub = calls[calls["case"] == case]
    if tokens is None and len(sub):
        tokens = int(sub["tokens"].min())
    return sub[sub["tokens"] == tokens].reset_index(drop=True)


DETAIL_REASON = "the most complex case measured"


def detail_case(result: RunResult) -> str | None:
    """The case shown call by call: the most complex measured one (interleaved first;
    ``DETAIL_REASON`` says so in the figure's title)."""
    measured = {r["case"] for r in result.summary if r.get("valid")}
    for case in reversed(CASES):
        if case in measured:
            return case
    return None


def call_range(calls: pd.DataFrame) -> tuple[float, float]:
    """The plotted range of per-call latencies: the lowest variant's 0.5th percentile to
    the highest variant's 99th."""
    data = [calls.loc[calls["variant"] == v, "host_us"].to_numpy() for v in VARIANTS]
    data = [d for d in data if d.size]
    return (
        float(min(np.percentile(d, LOW_PERCENTILE) for d in data)),
        float(max(np.percentile(d, HIGH_PERCENTILE) for d in data)),
    )


LOG_SCALE_SPAN = 2.0  # a log axis once the plotted range spans more than this factor
VIOLIN_HALF = 0.4  # a violin's half-width at its density's peak
MEDIAN_HALF, MEDIAN_TEXT = 0.3, 0.32  # a median's line either side of x; its label's x
VIOLIN_COLUMNS = ("case", "tokens", "variant", "host_us", "left", "right")
MEDIAN_COLUMNS = (
    *("case", "label", "tokens", "variant", "x", "left", "right", "median", "text_x", "text"),
    *("calls", "above", "below", "note"),
)
CALL_AXIS_COLUMNS = ("case", "label", "tokens", "low", "high", "log", "y_min", "y_max", "scale")


def _call_cases(calls: pd.DataFrame) -> list[tuple[str, int, pd.DataFrame, float, float, bool]]:
    """Per case and length of ``calls``: its rows, plotted range and whether on a log axis."""
    out = []
    for case, tokens in case_keys(calls) if len(calls) else []:
        sub = case_calls(calls, case, tokens)
        low, high = call_range(sub)
        out.append((case, tokens, sub, low, high, low > 0 and high / low > LOG_SCALE_SPAN))
    return out


def _variant_values(sub: pd.DataFrame) -> list[tuple[float, str, np.ndarray]]:
    """Each variant's x and its calls' latencies (variants with none left out)."""
    found = []
    for x, variant in enumerate(VARIANTS, start=1):
        values = sub.loc[sub["variant"] == variant, "host_us"].to_numpy(dtype=float)
        if values.size:
            found.append((float(x), variant, values))
    return found


def call_violins(calls: pd.DataFrame) -> pd.DataFrame:
    """The violins of the per-call view: per case, length and variant, the outline of a
    KDE of its calls inside the plotted range (``figurestats.violin``, in log space on a
    log axis), one row per grid point: the latency and the outline's ``left`` and
    ``right`` (``VIOLIN_HALF`` either side of the variant's x at the peak). None for a
    variant whose calls cannot make one."""
    rows = []
    for case, tokens, sub, low, high, log in _call_cases(calls):
        for x, variant, values in _variant_values(sub):
            inside = values[(values >= low) & (values <= high)]
            outline = figurestats.violin(inside, log) if inside.size else None
            if outline is None:
                continue
            for y, density in zip(*outline, strict=True):
                half = VIOLIN_HALF * float(density)
                rows.append((case, tokens, variant, float(y), x - half, x + half))
    return pd.DataFrame(rows, columns=list(VIOLIN_COLUMNS))


def call_medians(calls: pd.DataFrame) -> pd.DataFrame:
    """Per case, length and variant of ``calls``: the median of every call (a line from
    ``left`` to ``right``, its ``text`` at ``text_x``), the count of calls and of those
    above and below the plotted range, and a ``note`` saying so."""
    rows = []
    for case, tokens, sub, low, high, _ in _call_cases(calls):
        for x, variant, values in _variant_values(sub):
            above, below = int((values > high).sum()), int((values < low).sum())
            hidden = [f"{above} above {high:.0f} μs"] if above else []
            hidden += [f"{below} below {low:.0f} μs"] if below else []
            median = float(np.median(values))
            rows.append(
                {
                    "case": case,
                    "label": CASE_LABELS.get(case, case),
                    "tokens": tokens,
                    "variant": variant,
                    "x": x,
                    "left": x - MEDIAN_HALF,
                    "right": x + MEDIAN_HALF,
                    "median": median,
                    "text_x": x + MEDIAN_TEXT,
                    "text": f"median {median:.1f}",
                    "calls": int(values.size),
                    "above": above,
                    "below": below,
                    "note": f"{values.size} calls, "
                    + (" and ".join(hidden) + " not shown" if hidden else "all shown"),
                }
            )
    return pd.DataFrame(rows, columns=list(MEDIAN_COLUMNS))


def call_axes(calls: pd.DataFrame) -> pd.DataFrame:
    """The y axis of the per-call view per case and length: the plotted range
    (``call_range``), whether it is a log axis (the range spans more than
    ``LOG_SCALE_SPAN`` times), and its limits, holding the range and every violin whole
    (4 % padding on a linear axis, not below 0; 5 % on a log one), with the axis's name."""
    violins = call_violins(calls)
    rows = []
    for case, tokens, _, low, high, log in _call_cases(calls):
        mine = violins[(violins["case"] == case) & (violins["tokens"] == tokens)]["host_us"]
        bottom = min(low, *mine) if len(mine) else low
        top = max(high, *mine) if len(mine) else high
        if log:
            y_min, y_max, scale = bottom / 1.05, top * 1.05, "log scale"
        else:
            pad = 0.04 * (top - bottom or top or 1.0)
            y_min, y_max = max(bottom - pad, 0.0), top + pad
            scale = "linear" if y_min <= 0 else "linear, not from 0"
        label = CASE_LABELS.get(case, case)
        rows.append((case, label, tokens, low, high, log, y_min, y_max, scale))
    return pd.DataFrame(rows, columns=list(CALL_AXIS_COLUMNS))


# --- intervals: the forest and the compare figure ------------------------------------------

# The x range of an interval figure reaches past the estimates (and 0) by this many typical
# interval widths, or this share of the estimates' own span, or this many points, the most
# of the three; an interval end beyond it is off scale (drawn as an arrow with its number).
REACH_WIDTHS = 3.0
REACH_SPAN = 0.5
REACH_FLOOR_PP = 5.0
RANGE_PAD = 0.04
OFF_SCALE_COLUMNS = ("side", "value", "edge", "text")


def axis_range(frame: pd.DataFrame) -> tuple[float, float]:
    """The x range of an interval figure (``forest_table``, ``compare_table``'s runs
    panel): every estimate and 0, and each interval up to a reach that one wild interval
    (a quick run's −15772 % lower end) cannot stretch, so the other cases keep their
    width; padded."""
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


def off_scale(frame: pd.DataFrame) -> pd.DataFrame:
    """The interval ends of ``frame`` outside its ``axis_range``: one row per end, with its
    row's columns, which ``side`` (``low`` or ``high``), its ``value``, the axis limit it
    is drawn at (``edge``) and the number printed there (``text``)."""
    lo, hi = axis_range(frame) if len(frame) else (0.0, 0.0)
    rows = [
        {**row, "side": side, "value": float(v), "edge": edge, "text": f"{float(v):.1f} %"}
        for row in frame.to_dict("records")
        for side, v, edge, out in (
            ("low", row["low"], lo, _none_if_nan(row["low"]) is not None and row["low"] < lo),
            ("high", row["high"], hi, _none_if_nan(row["high"]) is not None and row["high"] > hi),
        )
        if out
    ]
    return pd.DataFrame(rows, columns=[*frame.columns, *OFF_SCALE_COLUMNS])


def _forest_rows(result: RunResult) -> list[dict[str, Any]]:
    """The summary rows the forest draws: valid, with an interval, in table order."""
    rows = [r for r in result.summary if r.get("valid") and r.get("reduction_ci95_pct")]
    return sorted(rows, key=lambda r: tables.table_order(r["case"], r["tokens"]))


def _several(rows: list[dict[str, Any]]) -> bool:
    return len({int(r["tokens"]) for r in rows}) > 1


def reduction_label(row: dict[str, Any]) -> str:
    """A row's figure in words: ``43.2 % [38.1, 46.5] faster`` (the verdict's interval,
    with its level when below 95 %)."""
    reduction, ci = row.get("reduction_pct"), row.get("reduction_ci95_pct")
    if reduction is None:
        return str(row.get("verdict", "invalid"))
    text = f"{reduction:.1f} %"
    if ci:
        level = float(row.get("ci_level", stats.CONFIDENCE))
        below = stats.labelled_level(level) < stats.CONFIDENCE
        text += f" [{ci[0]:.1f}, {ci[1]:.1f}]" + (f" ({tables.level_text(level)})" if below else "")
    return f"{text} {row.get('verdict', '')}".rstrip()


def forest_table(result: RunResult) -> pd.DataFrame:
    """One row per valid case with an interval, in table order: its row label
    (``input``), the headline reduction, the verdict's interval, the verdict, its label,
    the interval's method, and the A/A interval where there is one (None otherwise)."""
    rows = _forest_rows(result)
    several = _several(rows)
    out = []
    for row in rows:
        aa = (row.get("aa") or {}).get("reduction_ci95_pct") or [None, None]
        low, high = row["reduction_ci95_pct"]
        out.append(
            {
                "case": row["case"],
                "label": CASE_LABELS.get(row["case"], row["case"]),
                "tokens": int(row["tokens"]),
                "input": tables.input_label(row["case"], int(row["tokens"]), several),
                "reduction_pct": float(row["reduction_pct"]),
                "low": float(low),
                "high": float(high),
                "verdict": row.get("verdict"),
                "reading": reduction_label(row),
                "method": tables.interval_method(row),
                "aa_low": aa[0],
                "aa_high": aa[1],
            }
        )
    return pd.DataFrame(out, columns=list(FOREST_COLUMNS))


def forest_workers(result: RunResult) -> pd.DataFrame:
    """Each worker's own reduction per case of the forest (the units of the t interval),
    with the forest's row label."""
    rows = _forest_rows(result)
    several = _several(rows)
    out = []
    for row in rows:
        units = row.get("worker_reduction_pct") or []
        if len(units) < 2:
            continue
        for worker, value in enumerate(units):
            out.append(
                {
                    "case": row["case"],
                    "label": CASE_LABELS.get(row["case"], row["case"]),
                    "tokens": int(row["tokens"]),
                    "input": tables.input_label(row["case"], int(row["tokens"]), several),
                    "worker": worker,
                    "reduction_pct": float(value),
                }
            )
    columns = ["case", "label", "tokens", "input", "worker", "reduction_pct"]
    return pd.DataFrame(out, columns=columns)


def compare_table(
    runs: Mapping[str, RunResult],
    reference: Mapping[str, Any] | None = None,
    *,
    allow_mixed_windows: bool = False,
) -> pd.DataFrame:
    """The compare figure's rows, both panels. ``panel`` ``RUNS``: one row per valid case
    of each run (and of the PR's table, last, with no interval), in the runs' order: its
    series label (with its timing window when windows are mixed) and index (``run``), the
    reduction and the verdict's interval (None where there is none). ``panel``
    ``DIFFERENCE``: per pair of runs of the same configuration (``a``, ``b``) and case,
    run B's reduction minus A's (pp) with its interval and whether it excludes 0
    (``compare.differences``). Every row has its row label (``input``). Runs timed in
    different windows are refused unless ``allow_mixed_windows``."""
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
            rows.append(
                (series, row["case"], int(row["tokens"]), float(row["reduction_pct"]), *ci[:2])
            )
    if reference is not None:
        series = compare.series_label(compare.reference_name(dict(reference)), seen)
        tokens = int(reference.get("tokens"))
        for row in reference["rows"]:
            rows.append((series, row["case"], tokens, float(row["reduction_pct"]), None, None))
    several = len({t for _, _, t, *_ in rows}) > 1
    names = list(dict.fromkeys(r[0] for r in rows))
    out = [
        {
            "panel": RUNS,
            "series": series,
            "run": names.index(series),
            "case": case,
            "label": CASE_LABELS.get(case, case),
            "tokens": tokens,
            "input": tables.input_label(case, tokens, several),
            "reduction_pct": reduction,
            "low": low,
            "high": high,
            "differs": None,
            "a": None,
            "b": None,
        }
        for series, case, tokens, reduction, low, high in rows
    ]
    for found in compare.differences(dict(runs)):
        diff = found["difference"]
        if not isinstance(diff, stats.ReductionDifference):
            continue
        case, tokens = found["case"], int(found["tokens"])
        out.append(
            {
                "panel": DIFFERENCE,
                "series": f"{found['b']} − {found['a']}",
                "run": None,
                "case": case,
                "label": CASE_LABELS.get(case, case),
                "tokens": tokens,
                "input": tables.input_label(case, tokens, several),
                "reduction_pct": diff.difference_pp,
                "low": diff.low,
                "high": diff.high,
                "differs": diff.excludes_zero,
                "a": found["a"],
                "b": found["b"],
            }
        )
    return pd.DataFrame(out, columns=list(COMPARE_COLUMNS))


# --- work against time, and each form's operators -----------------------------------------

# The counted measures a case's work reduction is taken of: (work.json field, its name).
MEASURES = (("bytes", "bytes moved"), ("instructions", "instructions"))
DISAGREEMENT_COLUMNS = (
    *("case", "label", "tokens", "input", "measure", "labelled", "label_side"),
    *("work_reduction_pct", "reduction_pct", "low", "high", "gap_pp", "verdict"),
    *("baseline_work", "fixed_work"),
)
DIAGONAL_COLUMNS = ("x", "y")
OPERATOR_COLUMNS = (
    *("case", "label", "tokens", "input", "variant", "op", "op_label", "rank"),
    *("calls", "read", "written", "moved", "moved_text", "label_at", "start", "x_max"),
)
OPERATOR_REACH = 1.15  # a case's bytes axis reaches past its longest bar
INSIDE_SHARE = 0.4  # a bar this share of its case's longest or more carries its label inside
OPERATOR_CASE_COLUMNS = (
    *("case", "label", "tokens", "input", "variant"),
    *("moved", "operators", "start"),
)


def _counted(row: Mapping[str, Any], field: str) -> int | None:
    """A ledger's count of ``field`` (``bytes``: read + written), None where not counted."""
    if field == "bytes":
        read, written = row.get("bytes_read"), row.get("bytes_written")
        return None if read is None or written is None else int(read) + int(written)
    value = row.get(field)
    return None if value is None else int(value)


def disagreement_table(result: RunResult) -> pd.DataFrame:
    """One row per valid case with an interval and a ledger, per counted measure (bytes
    moved; instructions too where both forms' rows have ``instructions``): the work
    reduction 100 × (1 − fixed / baseline) of that measure, the headline wall-time
    reduction and the verdict's interval (``forest_table``'s), and how far the point
    lies from the y = x diagonal (``gap_pp``: time less work; below 0, under it).
    ``labelled``: the row that carries its case's label (its first measure), on the
    ``label_side`` (``right`` or ``left`` of its point) that alternates along the points,
    so neighbours' labels part."""
    ledgers = {(w.case, w.tokens): w for w in work.case_work(result)}
    out = []
    for row in forest_table(result).to_dict("records"):
        ledger = ledgers.get((row["case"], row["tokens"]))
        if ledger is None:
            continue
        first = True
        for field, measure in MEASURES:
            before, after = _counted(ledger.baseline, field), _counted(ledger.fixed, field)
            if before is None or after is None or before <= 0:
                continue
            reduction = 100.0 * (1.0 - after / before)
            out.append(
                {
                    **{k: row[k] for k in ("case", "label", "tokens", "input")},
                    "measure": measure,
                    "labelled": first,
                    "label_side": None,
                    "work_reduction_pct": reduction,
                    **{k: row[k] for k in ("reduction_pct", "low", "high")},
                    "gap_pp": row["reduction_pct"] - reduction,
                    "verdict": row["verdict"],
                    "baseline_work": before,
                    "fixed_work": after,
                }
            )
            first = False
    frame = pd.DataFrame(out, columns=list(DISAGREEMENT_COLUMNS))
    labelled = frame[frame["labelled"].astype(bool)]
    along = labelled.sort_values(["work_reduction_pct", "reduction_pct"]).index
    frame["label_side"] = frame["label_side"].astype(object)
    for i, index in enumerate(along):
        frame.at[index, "label_side"] = "left" if i % 2 else "right"
    return frame


def diagonal_table(disagreement: pd.DataFrame) -> pd.DataFrame:
    """The y = x line's two ends, at the limits both axes of the figure share: every work
    and time reduction, 0, and the intervals up to ``axis_range``'s reach."""
    if disagreement.empty:
        return pd.DataFrame(columns=list(DIAGONAL_COLUMNS))
    points = [*disagreement["work_reduction_pct"], *disagreement["reduction_pct"]]
    ends = pd.DataFrame(
        {
            "reduction_pct": points,
            "low": [*[np.nan] * len(disagreement), *disagreement["low"]],
            "high": [*[np.nan] * len(disagreement), *disagreement["high"]],
        }
    )
    lo, hi = axis_range(ends)
    return pd.DataFrame({"x": [lo, hi], "y": [lo, hi]}, columns=list(DIAGONAL_COLUMNS))


def _op_moved(row: Mapping[str, Any], op: str) -> tuple[int | None, int | None]:
    moved = (row.get("op_bytes") or {}).get(op)
    if not moved:
        return None, None
    return int(moved.get("read", 0)), int(moved.get("written", 0))


def operator_table(result: RunResult) -> pd.DataFrame:
    """One row per case, length, form and operator of its ledger: its calls per call of
    the form, the bytes it reads and writes (``op_bytes``; None where not counted), both
    (``moved``, and in words ``moved_text``) from ``start`` (0: a bar's base), the
    operator's row label in its case (``op_label``: its calls, baseline → fixed), whether
    the bar's label goes ``inside`` its end (``label_at``: at ``INSIDE_SHARE`` of its case's
    longest bar or more) or ``outside``, past it, and the case's bytes axis limit
    (``x_max``: ``OPERATOR_REACH`` × its longest bar). ``rank``
    orders the operators over the whole run, most bytes moved first (then by name)."""
    cases = work.case_work(result)
    several = len({w.tokens for w in cases}) > 1
    out = []
    for ledger in cases:
        forms = {"baseline": ledger.baseline, "fixed": ledger.fixed}
        calls = {v: dict(row.get("ops") or {}) for v, row in forms.items()}
        for variant in VARIANTS:
            row = forms[variant]
            for op, count in sorted(calls[variant].items()):
                read, written = _op_moved(row, op)
                moved = None if read is None or written is None else read + written
                before, after = (int(calls[v].get(op, 0)) for v in VARIANTS)
                out.append(
                    {
                        "case": ledger.case,
                        "label": ledger.label,
                        "tokens": ledger.tokens,
                        "input": tables.input_label(ledger.case, ledger.tokens, several),
                        "variant": variant,
                        "op": op,
                        "op_label": f"{op} ×{before} → ×{after}",
                        "rank": 0,
                        "calls": int(count),
                        "read": read,
                        "written": written,
                        "moved": moved,
                        "moved_text": None if moved is None else work.format_bytes(moved),
                        "label_at": "outside",
                        "start": 0.0,
                        "x_max": None,
                    }
                )
    frame = pd.DataFrame(out, columns=list(OPERATOR_COLUMNS))
    if len(frame):
        longest = frame.groupby(["case", "tokens"])["moved"].transform("max")
        frame["x_max"] = (OPERATOR_REACH * longest).where(longest > 0, 1.0)
        inside = (frame["moved"] >= INSIDE_SHARE * longest).fillna(False).astype(bool)
        frame["label_at"] = np.where(inside, "inside", "outside")
        most = frame.groupby("op")["moved"].max().fillna(-1)
        order = sorted(most.index, key=lambda op: (-most[op], op))
        frame["rank"] = frame["op"].map({op: i for i, op in enumerate(order)})
    return frame


def operator_cases(result: RunResult) -> pd.DataFrame:
    """The drill-down's picker: one row per case, length and form with a ledger, its bytes
    moved per call (read + written), its operator calls and ``start`` (0: a bar's base)."""
    cases = work.case_work(result)
    several = len({w.tokens for w in cases}) > 1
    out = [
        {
            "case": ledger.case,
            "label": ledger.label,
            "tokens": ledger.tokens,
            "input": tables.input_label(ledger.case, ledger.tokens, several),
            "variant": variant,
            "moved": _counted(ledger.baseline if variant == "baseline" else ledger.fixed, "bytes"),
            "operators": ledger.value(variant, "operators"),
            "start": 0.0,
        }
        for ledger in cases
        for variant in VARIANTS
    ]
    return pd.DataFrame(out, columns=list(OPERATOR_CASE_COLUMNS))
