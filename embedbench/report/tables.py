"""Tables from a run's results: the PR's before/after table and everything around it.

Every function takes a ``RunResult`` and returns a DataFrame or a string, so the
notebooks, the CLI and the HTML export show the same numbers. The PR table is
kept in the PR's four columns so it can be pasted into a review, its reduction the PR's
own 1 − After/Before of each row (``pr_table``); the interval, its estimate and the verdict
go into a second table. Around them: the diagnostics, timer-floor, validation, provenance,
configuration and environment tables, and the labels their cells and the report's
headline use. What the host verdict means in words is ``hostprose``'s; the banner above
the numbers is ``banner``'s; the figures' data are ``figuredata``'s.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import sys
from datetime import datetime, timezone
from pathlib import PurePath
from typing import Any

import numpy as np
import pandas as pd

from embedbench.cases import CASE_LABELS, CASES
from embedbench.harness import stats, sysinfo, windows
from embedbench.harness.design import DERIVED
from embedbench.harness.timing import METRIC_ORDER, TIMER_CASE
from embedbench.omni import families
from embedbench.report.markdown import frame_markdown
from embedbench.report.results import RunResult

__all__ = [
    "BUILT_IN_TARGET",
    "CHECKOUT_PARAMETERS",
    "NOT_APPLICABLE",
    "NOT_FOUND",
    "NOT_INSTALLED",
    "NOT_MEASURED",
    "NOT_RECORDED",
    "NOT_USED",
    "PR_ALIGN",
    "PR_COLUMNS",
    "VERDICT_COLUMNS",
    "checkpoint_kind",
    "checkpoint_name",
    "config_table",
    "device_label",
    "diagnostics_table",
    "environment_table",
    "family_label",
    "family_of",
    "geometry_text",
    "headline",
    "input_label",
    "interpreter_name",
    "interval_method",
    "level_text",
    "notes",
    "one_process",
    "ordered_rows",
    "pr_statistic",
    "pr_table",
    "provenance_table",
    "published_geometry",
    "run_label",
    "statistics_table",
    "styled",
    "table_order",
    "timer_floor_table",
    "timing_window",
    "to_pr_markdown",
    "unset_text",
    "validation_table",
    "verdict_tables",
]

PR_COLUMNS = ("Input", "Before (μs)", "After (μs)", "Host latency reduction")
PR_ALIGN = "lrrr"


NOT_MEASURED = "not measured"
_CASE_RANK = {case: i for i, case in enumerate(CASES)}


def table_order(case: str, tokens: int) -> tuple[int, int]:
    """Sort key of a row: by length, then in the benchmark's case order (``CASES``;
    unknown cases last)."""
    return tokens, _CASE_RANK.get(case, len(_CASE_RANK))


def ordered_rows(result: RunResult) -> list[dict[str, Any]]:
    """Summary rows in table order, plus a placeholder for each requested case with none
    (an interrupted or failed run), so the table shows what is missing."""
    rows = list(result.summary)
    present = {(r["case"], r["tokens"]) for r in rows}
    for tokens in result.metadata.get("lengths") or []:
        for case in result.metadata.get("cases") or []:
            if (case, tokens) not in present:
                rows.append(
                    {
                        "case": case,
                        "tokens": tokens,
                        "host_us": None,
                        "reduction_pct": None,
                        "verdict": NOT_MEASURED,
                        "valid": False,
                        "blocks": 0,
                    }
                )
    return sorted(rows, key=lambda r: table_order(r["case"], r["tokens"]))


def _reduction_text(row: dict[str, Any], reduction: float | None) -> str:
    """A reduction as the PR writes it (``0.95%``), or why the row has none."""
    if reduction is not None:
        return f"{reduction:.2f}%"
    if row.get("verdict") == NOT_MEASURED:
        return NOT_MEASURED
    return "n/a" if row.get("valid") else "invalid"


def _several_lengths(rows: list[dict[str, Any]]) -> bool:
    return len({r["tokens"] for r in rows}) > 1


def input_label(case: str, tokens: int, several_lengths: bool) -> str:
    """The PR's row label, with the token count when a run has several lengths."""
    label = CASE_LABELS.get(case, case)
    return f"{label} ({tokens} tokens)" if several_lengths else label


def _fmt_us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def one_process(row: dict[str, Any]) -> bool:
    """Whether a row's interval is the one-process Hodges–Lehmann one: its estimate (the
    headline, ``reduction_pct``) is then not the PR's ratio of its Before and After."""
    return row.get("interval_method") == stats.WITHIN_PROCESS


def pr_statistic(row: dict[str, Any]) -> float | None:
    """The PR's 100 × (1 − After/Before) of the row's own Before and After (``host_us``),
    in every design; a row without both takes its recorded ``pr_reduction_pct``."""
    host = row.get("host_us") or {}
    before, after = host.get("baseline"), host.get("fixed")
    if isinstance(before, int | float) and isinstance(after, int | float) and before > 0:
        return 100.0 * (1.0 - float(after) / float(before))
    value = row.get("pr_reduction_pct")
    return None if value is None else float(value)


def pr_table(result: RunResult) -> pd.DataFrame:
    """One row per case (and length, when several) in the PR's four columns, as strings.

    Before and After are the PR's medians of block medians (with workers, each worker's,
    combined by a geometric mean); the reduction is the PR's 1 − After/Before of that
    row's own Before and After (``pr_statistic``), in every design. The interval's own
    estimate, which in one process is the Hodges–Lehmann one, is in ``statistics_table``.
    """
    rows = ordered_rows(result)
    several = _several_lengths(rows)
    data = []
    for row in rows:
        host = row.get("host_us") or {}
        data.append(
            {
                PR_COLUMNS[0]: input_label(row["case"], row["tokens"], several),
                PR_COLUMNS[1]: _fmt_us(host.get("baseline")),
                PR_COLUMNS[2]: _fmt_us(host.get("fixed")),
                PR_COLUMNS[3]: _reduction_text(row, pr_statistic(row)),
            }
        )
    return pd.DataFrame(data, columns=list(PR_COLUMNS))


def to_pr_markdown(table: pd.DataFrame) -> str:
    """The table as markdown in the PR's layout (header, alignment row, rows).

    pandas' ``to_markdown`` pads cells and writes ``|:---|`` alignment rows; the
    PR's text is unpadded with ``| --- | ---: |``, so this writes it directly.
    """
    return frame_markdown(table, align=PR_ALIGN + "r" * (len(table.columns) - len(PR_ALIGN)))


def _interval(ci: Any) -> str:
    return "n/a" if not ci else f"[{ci[0]:.2f}%, {ci[1]:.2f}%]"


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}%"


def level_text(level: Any) -> str:
    """An interval's level as labelled: ``95%``, or its true level below that."""
    return "n/a" if level is None else f"{100.0 * stats.labelled_level(float(level)):.4g}%"


def interval_method(row: dict[str, Any]) -> str:
    """How a row's interval was made, in words (what it can and cannot see)."""
    method = row.get("interval_method")
    if method is None:
        return "block bootstrap (older results)" if row.get("reduction_ci95_pct") else "n/a"
    units = row.get("interval_units")
    if method == stats.BETWEEN_PROCESSES:
        return f"t over {units} worker processes ({units - 1} df)"
    return f"Hodges–Lehmann over {units} blocks, one process"


def statistics_table(result: RunResult) -> pd.DataFrame:
    """The verdict's interval, its level and method, and the paired statistics per PR row.

    The interval is the one the verdict, the gate and the MDE use: a t interval over
    the worker processes' own headlines, or Hodges–Lehmann within one process, with
    its achieved level. The HL estimate and interval and the Wilcoxon p pool every
    block as if from one process (a within-process view). "Host speed" is the case's
    canary level: the reduction holds at that speed of the host, and a run on a slower or
    faster host may differ by the host alone (see ``compare.HOST_SPEED_EXPLAINS``).
    """
    rows = ordered_rows(result)
    several = _several_lengths(rows)
    data = []
    for row in rows:
        p = row.get("wilcoxon_p")
        hl_level = row.get("hl_confidence")
        hl = _interval(row.get("hl_ci95_pct"))
        if hl_level is not None and hl_level < stats.CONFIDENCE:
            hl += f" ({level_text(hl_level)})"
        measured = row.get("reduction_ci95_pct") is not None
        entry = {
            "Input": input_label(row["case"], row["tokens"], several),
            "Estimate": _pct(row.get("reduction_pct")),
            "Interval": _interval(row.get("reduction_ci95_pct")),
            "Level": level_text(row.get("ci_level", stats.CONFIDENCE)) if measured else "n/a",
            "Verdict": row.get("verdict", "n/a"),
            "Host speed": _canary_text(row.get("canary_us")),
            "MDE": _pct(row.get("mde_pct")),
            "Method": interval_method(row),
            "HL estimate (pooled)": _pct(row.get("hl_reduction_pct")),
            "HL interval (pooled)": hl,
            "Wilcoxon p": "n/a" if p is None else f"{p:.2g}",
            "Blocks": row.get("blocks"),
            "Valid": bool(row.get("valid", False)),
        }
        if any("aa" in r for r in rows):
            aa = row.get("aa") or {}
            entry["A/A reduction"] = _pct(aa.get("reduction_pct"))
            entry["A/A interval"] = _interval(aa.get("reduction_ci95_pct"))
            covers = aa.get("covers_zero")
            entry["A/A covers 0"] = "n/a" if covers is None else ("yes" if covers else "NO")
        data.append(entry)
    return pd.DataFrame(data)


VERDICT_COLUMNS = (
    "Input",
    "Estimate",
    "Interval",
    "Level",
    "Verdict",
    "MDE",
    "Host speed",
    "Method",
)


def verdict_tables(result: RunResult) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """``statistics_table`` in two narrower tables, each readable in a 900 px column: the
    verdict's (interval, level, verdict, MDE, host speed) and the pooled within-process
    view with the checks (HL, Wilcoxon, blocks, valid, A/A). The interval method, when
    every row shares it, is returned once instead of as a column of repeats."""
    full = statistics_table(result)
    methods = set(full["Method"]) if "Method" in full else set()
    method = methods.pop() if len(methods) == 1 else None
    first = [c for c in VERDICT_COLUMNS if c in full and (c != "Method" or method is None)]
    second = ["Input", *(c for c in full.columns if c not in VERDICT_COLUMNS)]
    return full[first], full[second], method


def _canary_text(level: Any) -> str:
    """A case's canary level, the host speed its reduction holds at."""
    return "not observed" if level is None else f"canary {level:.0f} µs"


def diagnostics_table(result: RunResult) -> pd.DataFrame:
    """Order effect, drift, outlier blocks, within-block spread and frequency excursions."""
    rows = [r for r in ordered_rows(result) if r.get("diagnostics")]
    several = _several_lengths(rows)
    data = []
    for row in rows:
        diag = row["diagnostics"]
        order, drift, outliers = diag.get("order_effect") or {}, diag["drift"], diag["outliers"]
        spread, freq = diag["spread"]["median"], diag["frequency"]
        without = outliers.get("reduction_pct_without")
        data.append(
            {
                "Input": input_label(row["case"], row["tokens"], several),
                "Order effect (pp)": _fmt_num(order.get("difference_pct_points"))
                + (" (detected)" if order.get("detected") else ""),
                "Drift rho (d, baseline)": f"{_fmt_num(drift.get('rho_log_ratio'))}, "
                f"{_fmt_num(drift.get('rho_baseline'))}"
                + (" (detected)" if drift.get("detected") else ""),
                "Outlier blocks": ", ".join(map(str, outliers["flagged"])) or "none",
                "Reduction without outliers": _pct(without),
                "Within-block IQR/median": ", ".join(
                    f"{v} {_fmt_num(spread.get(v), 3)}" for v in ("baseline", "fixed")
                ),
                "Page faults/call (baseline, fixed)": _faults(row.get("minor_faults_per_call")),
                "Frequency excursions": (
                    "not observable"
                    if not freq.get("observable")
                    else ", ".join(map(str, freq.get("flagged") or [])) or "none"
                ),
            }
        )
    return pd.DataFrame(data)


def _faults(per_call: dict[str, float | None] | None) -> str:
    if not per_call or all(v is None for v in per_call.values()):
        return "not recorded"
    return ", ".join(_fmt_num(per_call.get(v), 1) for v in ("baseline", "fixed"))


def _fmt_num(value: Any, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def notes(result: RunResult) -> list[str]:
    """One line per diagnostic that fired, per case (empty when nothing stood out)."""
    several = _several_lengths(result.summary)
    return [
        f"{input_label(row['case'], row['tokens'], several)}: {note}"
        for row in ordered_rows(result)
        for note in row.get("notes") or []
    ]


def timer_floor_table(result: RunResult) -> pd.DataFrame:
    """Median, p5 and p95 of the empty call, per metric."""
    samples = [s for r in result.records if r.get("case") == TIMER_CASE for s in r["samples_us"]]
    if not samples:
        return pd.DataFrame(columns=["metric", "calls", "p5", "p50", "p95"])
    arr = np.asarray(samples, dtype=float)
    rows = [  # µs to 3 decimals (ns): the timers resolve no finer
        {
            "metric": name,
            "calls": len(arr),
            **{k: round(v, 3) for k, v in stats.percentiles(arr[:, i]).items()},
        }
        for i, name in enumerate(METRIC_ORDER)
    ]
    return pd.DataFrame(rows).rename(columns={"p50": "median"})


def validation_table(result: RunResult) -> pd.DataFrame:
    """Lookup counts (observed / expected) and torch.equal per case and length."""
    rows = []
    for row in result.validation:
        calls, expected = row.get("calls", {}), row.get("expected_calls", {})
        observed = {
            v: f"{calls.get(v)} (expected {expected.get(v)})" for v in ("baseline", "fixed")
        }
        rows.append(
            {
                "Input": CASE_LABELS.get(row["case"], row["case"]),
                "Tokens": row["tokens"],
                "Baseline lookups": observed["baseline"],
                "Fixed lookups": observed["fixed"],
                "torch.equal": row.get("torch_equal"),
                "OK": bool(row.get("ok")),
                "Mismatch": "" if row.get("ok") else str(row.get("mismatch")),
            }
        )
    return pd.DataFrame(rows)


def headline(result: RunResult) -> str:
    """What the report is of, e.g. ``Qwen3-Omni embed_input_ids before/after (vLLM-Omni
    PR #7573) · CPU · reference · synthetic``."""
    m = result.metadata
    family = family_of(m)
    pr = families.get(family).pr if family in families.names() else "?"
    return f"{family_label(m)} embed_input_ids before/after (vLLM-Omni PR {pr}) · {_setup_label(m)}"


def _ref(ref: Any, sha: Any) -> Any:
    return ref if not sha or sha == ref else f"{ref} ({sha})"


# The built-in replica ("reference" target) reads no checkout and imports no vLLM: its
# runs carry no refs or versions of those, which the tables say instead of "None".
BUILT_IN_TARGET = "reference"
NOT_APPLICABLE = "n/a (built-in replica)"
NOT_USED = "not used (built-in replica)"
CHECKOUT_PARAMETERS = ("repo", "baseline_ref", "candidate_ref")


NOT_RECORDED = "not recorded"  # a fact the run's metadata lacks (an older run, or unread)


def provenance_table(result: RunResult) -> pd.DataFrame:
    """What was measured where: target, device, core, versions, checkpoint, design; a
    fact the run did not record says so. The checkpoint is named, not located
    (``checkpoint_name``): the table goes into PR comments."""
    m = result.metadata
    versions = m.get("versions") or {}
    refs = m.get("refs") or {}
    built_in = m.get("target") == BUILT_IN_TARGET
    vllm_versions = " / ".join(
        NOT_RECORDED if v is None else str(v)
        for v in (m.get("vllm"), versions.get("vllm-omni"), m.get("transformers"))
    )
    items = [
        ("status", m.get("status")),
        ("target", m.get("target")),
        ("family", family_label(m)),
        ("lm shim", m.get("lm_shim")),
        ("language model", (m.get("target_info") or {}).get("language_model")),
        (
            "baseline ref",
            NOT_APPLICABLE if built_in else _ref(m.get("baseline_ref"), refs.get("baseline_sha")),
        ),
        (
            "candidate ref",
            NOT_APPLICABLE
            if built_in
            else _ref(refs.get("candidate_ref"), refs.get("candidate_sha")),
        ),
        ("work tree dirty", NOT_APPLICABLE if built_in else m.get("dirty")),
        ("device", f"{m.get('device')} ({m.get('device_name')})"),
        ("cpu core", m.get("cpu_core")),
        ("cpu frequency source", m.get("cpu_frequency_source")),
        ("checkpoint", checkpoint_name(m)),
        ("synthetic checkpoint", m.get("synthetic")),
        ("embedding", f"{m.get('embedding_shape')} {m.get('dtype')}"),
        (
            "design",
            f"warmup {m.get('warmup')}, {m.get('blocks')} blocks × "
            f"{m.get('iterations')} calls, seed {m.get('seed')}",
        ),
        ("lengths", m.get("lengths")),
        ("timing window", windows.describe(timing_window(m))),
        ("python / torch", f"{versions.get('python')} / {m.get('torch')}"),
        ("vllm / vllm-omni / transformers", NOT_USED if built_in else vllm_versions),
        ("busy core", m.get("busy_core") or "no"),
        ("busy I/O", m.get("busy_io") or "no"),
        ("started", _utc_iso(m.get("start_time"), timespec="auto")),
        ("ended", _utc_iso(m.get("end_time"), timespec="auto")),
    ]
    if m.get("missing_files"):
        items.insert(1, ("missing files", ", ".join(m["missing_files"])))
    return pd.DataFrame(
        [{"field": k, "value": NOT_RECORDED if v is None else str(v)} for k, v in items]
    ).set_index("field")


# The table's dtype as the PR's README writes it.
_DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def geometry_text(metadata: dict[str, Any]) -> str | None:
    """The embedding table's geometry, ``152064 × 3584 bf16`` (None when not recorded)."""
    shape = metadata.get("embedding_shape")
    if not shape or len(shape) != 2:
        return None
    dtype = str(metadata.get("dtype") or "")
    text = f"{shape[0]} × {shape[1]}"
    return f"{text} {_DTYPE_SHORT.get(dtype, dtype)}".rstrip()


def published_geometry(metadata: dict[str, Any]) -> bool | None:
    """Whether the table has the family's published vocabulary × hidden size (None when
    the shape or the family is unknown here)."""
    shape = metadata.get("embedding_shape")
    family = family_of(metadata)
    if not shape or len(shape) != 2 or family not in families.names():
        return None
    spec = families.get(family)
    return list(shape) == [spec.vocab_size, spec.hidden_size]


def checkpoint_name(metadata: dict[str, Any]) -> str:
    """The checkpoint without the local path: a synthetic one by its geometry
    (``synthetic, Qwen2.5-Omni geometry 152064 × 3584 bf16``), any other by its
    directory's last component; ``not recorded`` when the run has neither."""
    geometry = geometry_text(metadata)
    if metadata.get("synthetic"):
        if geometry is None:
            return "synthetic"
        family = family_label(metadata)
        if published_geometry(metadata):
            return f"synthetic, {family} geometry {geometry}"
        return f"synthetic, {geometry} (not {family}'s published geometry)"
    model = metadata.get("model")
    if not model:
        return NOT_RECORDED
    return PurePath(str(model)).name or str(model)


def interpreter_name(executable: Any) -> str:
    """The interpreter by name and version, not its path: ``python3.12 (CPython 3.12.3)``."""
    version = f"{platform.python_implementation()} {platform.python_version()}"
    name = PurePath(str(executable)).name if executable else ""
    return f"{name} ({version})" if name else version


def timing_window(metadata: dict[str, Any]) -> str:
    """The timing window a loaded result was measured with (``windows``; ``load_results``
    names it for older directories and the original script's, see ``compat``)."""
    return str(metadata["timing_window"])


def unset_text(help_text: str) -> str:
    """What an unset parameter means, from its help (``…; unset: the lowest allowed
    core`` → ``unset (the lowest allowed core)``); plain ``unset`` where it says nothing."""
    _, found, meaning = help_text.partition("unset: ")
    return f"unset ({meaning.strip()})" if found and meaning.strip() else "unset"


def config_table(config: Any) -> pd.DataFrame:
    """A run's parameters as resolved by RunConfig, one row each (shown before measuring);
    a parameter left unset says so and what that means, never a blank cell."""
    data = config.to_json()
    helps = {f.name: str(f.metadata.get("help", "")) for f in dataclasses.fields(config)}
    if data.get("target") == BUILT_IN_TARGET:  # the checkout's parameters are unused
        data.update({k: NOT_APPLICABLE for k in CHECKOUT_PARAMETERS if k in data})
    for name in ("blocks", "processes"):
        if getattr(config, f"{name}_source", None) == DERIVED:
            data[name] = f"{data[name]} (unset, derived)"
    return pd.DataFrame(
        [
            {"parameter": k, "value": unset_text(helps.get(k, "")) if v is None else str(v)}
            for k, v in data.items()
        ]
    ).set_index("parameter")


NOT_INSTALLED = "not installed"
NOT_FOUND = "not found on this machine"


def _cuda_text() -> str:
    """Why there is no CUDA version: torch is a CPU build, or this process never imported
    torch (the report side does not), so nothing read it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "not read (torch not imported in this process)"
    return "none (a CPU build of torch)"


def environment_table() -> pd.DataFrame:
    """This machine and its software, shown before a run measures; a fact it could not
    read says which kind of missing it is (not installed, not read, not found). The
    interpreter is named, not located (``interpreter_name``)."""
    facts = sysinfo.host_facts()
    software = sysinfo.versions()
    items: dict[str, Any] = {
        **{k: NOT_FOUND if v is None else v for k, v in facts.items()},
        **{k: NOT_INSTALLED if v is None else v for k, v in software.items()},
    }
    if facts.get("executable"):  # its name, not its path: the page may be shared
        items["executable"] = interpreter_name(facts["executable"])
    if software.get("cuda") is None:
        items["cuda"] = _cuda_text()
    items["allowed environment"] = sysinfo.allowed_environment() or "(none set)"
    return pd.DataFrame([{"fact": k, "value": str(v)} for k, v in items.items()]).set_index("fact")


def device_label(metadata: dict[str, Any]) -> str:
    """``CPU``, or the GPU's name (``cuda`` when the run did not record it)."""
    device = str(metadata.get("device") or "unknown device")
    if device == "cpu":
        return "CPU"
    return str(metadata.get("device_name") or device)


def checkpoint_kind(metadata: dict[str, Any]) -> str:
    """``synthetic`` or ``real`` checkpoint (``unknown checkpoint`` when not recorded)."""
    synthetic = metadata.get("synthetic")
    if synthetic is None:
        return "unknown checkpoint"
    return "synthetic" if synthetic else "real"


def family_of(metadata: dict[str, Any]) -> str:
    """The family a run measured; results from before families were recorded (and the
    original script's) measured the embedded default's family, the only family then."""
    return str(metadata.get("family") or families.default().name)


def family_label(metadata: dict[str, Any]) -> str:
    """The family's label (its name, for a family not registered here)."""
    family = family_of(metadata)
    return families.get(family).label if family in families.names() else family


def _setup_label(metadata: dict[str, Any]) -> str:
    """Device, target and checkpoint kind: ``CPU · reference · synthetic``."""
    target = metadata.get("target") or "unknown target"
    return f"{device_label(metadata)} · {target} · {checkpoint_kind(metadata)}"


def run_label(result: RunResult) -> str:
    """What a run measured, in a few words: family, device, target and checkpoint kind."""
    return f"{family_label(result.metadata)} · {_setup_label(result.metadata)}"


def _utc_iso(epoch: Any, timespec: str = "seconds") -> Any:
    """An epoch in seconds as ISO UTC, to the second unless ``timespec`` says otherwise
    (anything else as it is)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int | float) or not math.isfinite(epoch):
        return epoch
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec=timespec)


def styled(frame: pd.DataFrame) -> Any:
    """A frame for notebook display: no positional index, text columns left-aligned,
    numbers to 3 decimals at most (not pandas' 6: the timer floor's µs are ns-resolved)."""
    styler = frame.style.format(precision=3)
    if isinstance(frame.index, pd.RangeIndex):
        styler = styler.hide(axis="index")
    text_columns = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    return styler.set_properties(subset=text_columns, **{"text-align": "left"})
