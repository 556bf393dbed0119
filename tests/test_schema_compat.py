"""Schema checks of output dirs and reading the original PR script's output format."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    ORIGINAL_METADATA_KEYS,
    ORIGINAL_RECORD_KEYS,
    ORIGINAL_SUMMARY_KEYS,
    ORIGINAL_VALIDATION_KEYS,
    original_metadata,
)

from embedbench import load_results
from embedbench.errors import OutputDirError
from embedbench.omni.scenarios import CASES
from embedbench.report import schema, tables, upgrades
from embedbench.report.banner import banner_html
from embedbench.report.results import RESULT_FILES, inspect_results_dir
from embedbench.report.schema import SCHEMA_VERSION


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_run_dir_passes_its_schema(small_run_dir):
    assert inspect_results_dir(small_run_dir).format == "embedbench"


def test_our_files_hold_every_field_of_the_originals(small_run_dir):
    """Whoever read the original's output reads ours: its fields, its names, its scopes."""
    files = {name: json.loads((small_run_dir / name).read_text()) for name in RESULT_FILES}
    assert set(ORIGINAL_METADATA_KEYS) <= set(files["metadata.json"])
    for record in files["micro-raw.json"]:
        assert set(ORIGINAL_RECORD_KEYS) <= set(record)
        assert (record["scope"], record["variant"]) == ("overhead", "timer_floor") or (
            record["scope"] == "whole_wrapper" and record["variant"] in ("baseline", "fixed")
        )
    for row in files["validation.json"]:
        assert set(ORIGINAL_VALIDATION_KEYS) <= set(row)
        assert row["device"] == "cpu" and row["same_input_wrapper_torch_equal"] is True
    for row in files["summary.json"]:
        assert set(ORIGINAL_SUMMARY_KEYS) <= set(row)


def test_aa_raw_holds_aa_records_only(small_run_dir, tmp_path):
    run = _copy(small_run_dir, tmp_path / "run")
    records = json.loads((run / "micro-raw.json").read_text())
    (run / "aa-raw.json").write_text(json.dumps(records[-1:]))  # an A/B record
    with pytest.raises(OutputDirError, match=r"aa-raw.json\[0\].scope"):
        inspect_results_dir(run)


@pytest.mark.parametrize(
    "file_name, change, fragment",
    [
        (
            "summary.json",
            lambda d: d[2].update(reduction_pct="18%"),
            "summary.json[2].reduction_pct",
        ),
        (
            "micro-raw.json",
            lambda d: d[5]["samples_us"][0].pop(),
            "micro-raw.json[5].samples_us[0]",
        ),
        ("metadata.json", lambda d: d.pop("metric_order"), "metric_order"),
        ("validation.json", lambda d: d[0].update(ok="yes"), "validation.json[0].ok"),
        ("metadata.json", lambda d: d.update(status="done"), "metadata.json.status"),
    ],
    ids=["summary-type", "raw-triple", "metadata-missing", "validation-type", "status-enum"],
)
def test_hand_edited_files_name_the_first_bad_field(
    small_run_dir, tmp_path, file_name, change, fragment
):
    run = _copy(small_run_dir, tmp_path / "run")
    _edit(run / file_name, change)
    with pytest.raises(OutputDirError) as info:
        load_results(run)
    message = str(info.value)
    assert fragment in message and "\n" not in message


def _to_original(src, dst, *, crashed_after=None):
    """Rewrite a run dir as the original script writes it (its fields, its order: the
    timer floor, then each case's blocks, on "cuda" as its metadata says).

    ``crashed_after=n``: the run crashed while timing case n + 1, after validating it: the
    original had written micro-raw.json (n cases) and validation.json (n + 1 rows), never
    metadata.json or summary.json, which it writes only when it finishes.
    """
    dst.mkdir()
    meta = json.loads((src / "metadata.json").read_text())
    original_meta = original_metadata(meta, meta["metric_order"])
    assert tuple(original_meta) == ORIGINAL_METADATA_KEYS  # the keys, in the order written
    rank = {case: i for i, case in enumerate(["timer", *CASES])}
    records = [
        {**{k: r[k] for k in ORIGINAL_RECORD_KEYS}, "device": "cuda"}
        for r in sorted(
            json.loads((src / "micro-raw.json").read_text()),
            key=lambda r: (rank[r["case"]], r["block"], r.get("position", 0)),
        )
        if r["case"] != "timer" or r["worker"] == 0  # one process, one timer floor
    ]
    validation = [
        {**{k: v[k] for k in ORIGINAL_VALIDATION_KEYS}, "device": "cuda"}
        for v in json.loads((src / "validation.json").read_text())
    ]
    summary = [
        {k: s[k] for k in ORIGINAL_SUMMARY_KEYS}
        for s in json.loads((src / "summary.json").read_text())
    ]
    files = dict(zip(RESULT_FILES, (original_meta, records, validation, summary), strict=True))
    if crashed_after is not None:
        measured = set(CASES[:crashed_after])
        files = {
            "micro-raw.json": [r for r in records if r["case"] in {"timer", *measured}],
            "validation.json": validation[: crashed_after + 1],
        }
    for name, data in files.items():
        (dst / name).write_text(json.dumps(data))
    return dst


def test_original_format_is_read_and_completed(small_run_dir, tmp_path):
    original = _to_original(small_run_dir, tmp_path / "original")
    assert inspect_results_dir(original).format == "original"
    result = load_results(original)
    ours = load_results(small_run_dir)
    assert result.metadata["source_format"] == "original"
    assert result.status == "complete" and result.metadata["device_name"] == "NVIDIA H100 80GB"
    assert result.all_valid
    for case in CASES:
        theirs, mine = result.summary_row(case, 300), ours.summary_row(case, 300)
        # The original's records carry no worker: one process, the PR's statistic over all
        # blocks pooled, which our run keeps beside its per-worker headline.
        records = [r for r in ours.records if r["case"] == case and r["scope"] != "overhead"]
        pooled = {
            v: float(
                np.median(
                    [
                        np.median([s[0] for s in r["samples_us"]])
                        for r in records
                        if r["variant"] == v
                    ]
                )
            )
            for v in ("baseline", "fixed")
        }
        assert theirs["host_us"] == pytest.approx(pooled)
        assert theirs["pr_reduction_pct"] == pytest.approx(mine["pooled_reduction_pct"])
        assert theirs["interval_method"] == "Hodges–Lehmann, one process"
        low, high = theirs["reduction_ci95_pct"]
        assert theirs["workers"] == 1 and low < high
        # Its headline is the Hodges–Lehmann estimate, inside the interval it is shown with.
        assert low <= theirs["reduction_pct"] == theirs["hl_reduction_pct"] <= high


def test_original_format_renders_through_the_cli(small_run_dir, tmp_path):
    original = _to_original(small_run_dir, tmp_path / "original")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "embedbench",
            "report",
            str(original),
            "--html",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| Input | Before (μs) | After (μs) | Host latency reduction |" in proc.stdout
    assert "NVIDIA H100 80GB" in (tmp_path / "r.html").read_text()


def test_a_crashed_original_run_is_read_as_partial(small_run_dir, tmp_path):
    complete = load_results(_to_original(small_run_dir, tmp_path / "complete"))
    crashed = _to_original(small_run_dir, tmp_path / "crashed", crashed_after=3)
    assert sorted(p.name for p in crashed.iterdir()) == ["micro-raw.json", "validation.json"]
    assert inspect_results_dir(crashed).format == "original"
    result = load_results(crashed)
    meta = result.metadata
    assert result.status == "interrupted" and meta["source_format"] == "original"
    assert meta["missing_files"] == ["metadata.json", "summary.json"]
    assert (meta["lengths"], meta["blocks"], meta["iterations"]) == ([300], 6, 3)
    assert meta["device"] == "cuda" and meta["cases"] == list(CASES)
    # A row for every case in the records, recomputed as for the complete run.
    assert [(r["case"], r["tokens"]) for r in result.summary] == [(c, 300) for c in CASES[:3]]
    for row in result.summary:
        assert row == complete.summary_row(row["case"], 300)
        assert row["valid"] and row["reduction_ci95_pct"] is not None
    assert len(result.validation) == 4 and all(v["ok"] for v in result.validation)
    table = tables.pr_table(result)
    assert list(table["Host latency reduction"]).count("not measured") == 3
    assert "partial run of the original script" in banner_html(result)


def test_a_crashed_original_run_through_the_cli(small_run_dir, tmp_path):
    crashed = _to_original(small_run_dir, tmp_path / "crashed", crashed_after=3)
    proc = subprocess.run(
        [sys.executable, "-m", "embedbench", "report", str(crashed)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The report of an unfinished run exits 0, as for an interrupted embedbench run.
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # One process (the original's records carry no worker): still the PR's four columns.
    header = lines.index("| Input | Before (μs) | After (μs) | Host latency reduction |")
    rows = lines[header + 2 : header + 2 + len(CASES)]
    assert [r.endswith("| not measured |") for r in rows] == [False] * 3 + [True] * 3
    assert "> run status: interrupted: partial results" in proc.stdout
    assert "no metadata.json, summary.json" in proc.stdout
    checked = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(crashed)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    assert "original format, partial run without metadata.json, summary.json" in checked.stdout


def test_a_partial_dir_of_our_format_reads_as_before(small_run_dir, tmp_path):
    run = _copy(small_run_dir, tmp_path / "run")
    _edit(run / "metadata.json", lambda meta: meta.update(status="interrupted"))
    _edit(run / "summary.json", lambda rows: rows.__delitem__(slice(3, None)))
    result = load_results(run)
    assert result.status == "interrupted" and "missing_files" not in result.metadata
    assert list(tables.pr_table(result)["Host latency reduction"]).count("not measured") == 3
    (run / "summary.json").unlink()  # our run writes every file first: one missing is damage
    with pytest.raises(OutputDirError, match=r"has no summary\.json"):
        load_results(run)


def test_validate_command(small_run_dir, tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(small_run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and "embedbench format" in ok.stdout
    run = _copy(small_run_dir, tmp_path / "run")
    _edit(run / "summary.json", lambda d: d[0].pop("host_us"))
    bad = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "summary.json[0]" in bad.stderr


@pytest.mark.parametrize("crashed_after", [None, 3], ids=["complete", "crashed"])
def test_original_format_renders_through_the_report_notebook(
    small_run_dir, tmp_path, crashed_after
):
    import nbformat
    import papermill as pm

    original = _to_original(small_run_dir, tmp_path / "original", crashed_after=crashed_after)
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "report.ipynb"
    out = tmp_path / "report.ipynb"
    pm.execute_notebook(
        str(notebook),
        str(out),
        parameters={"results_dir": str(original)},
        kernel_name="python3",
        progress_bar=False,
    )
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(o.get("text", "") for o in outputs)
    assert "| Input | Before (μs) | After (μs) | Host latency reduction |" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4
    html = "\n".join(o.get("data", {}).get("text/html", "") for o in outputs)
    if crashed_after is not None:  # the banner says so, and what is missing
        assert "original script (it did not finish): no metadata.json, summary.json" in html
        assert text.count("| not measured |") == len(CASES) - crashed_after


def test_results_of_schema_version_1_still_read_and_render(small_run_dir, tmp_path):
    # An earlier embedbench: schema 1, a block-bootstrap interval, no workers.
    old = _copy(small_run_dir, tmp_path / "v1")

    def downgrade_metadata(meta):
        meta["schema_version"] = 1
        for key in ("processes", "workers"):
            meta.pop(key, None)

    def downgrade_summary(rows):
        for row in rows:
            for key in ("ci_level", "interval_method", "interval_units", "workers"):
                row.pop(key, None)

    _edit(old / "metadata.json", downgrade_metadata)
    _edit(old / "summary.json", downgrade_summary)
    _edit(old / "micro-raw.json", lambda records: [r.pop("worker", None) for r in records])
    _edit(old / "validation.json", lambda rows: [r.pop("device") for r in rows])
    result = load_results(old)
    table = tables.statistics_table(result)
    assert set(table["Method"]) == {"block bootstrap (older results)"}
    assert set(table["Level"]) == {"95%"}

    _edit(old / "metadata.json", lambda meta: meta.update(schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(OutputDirError, match="schema_version"):
        load_results(old)


# Schema 3 writes each metadata fact once; these are the second copies 1 and 2 wrote.
DROPPED_TOP_LEVEL = ("started_at", "ended_at", "candidate_ref", "ids_dtype")
DROPPED_NESTED = {
    "refs": ("baseline_ref", "checked_out_commit"),
    "versions": ("torch", "vllm", "transformers"),
    "embedding": ("shape", "dtype"),
}


def test_a_new_run_writes_each_metadata_fact_once(small_run_dir):
    meta = json.loads((small_run_dir / "metadata.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION
    assert set(ORIGINAL_METADATA_KEYS) <= set(meta)
    assert not set(DROPPED_TOP_LEVEL) & set(meta)
    for group, keys in DROPPED_NESTED.items():
        assert not set(keys) & set(meta[group]), group
    assert set(meta["refs"]) == {"baseline_sha", "candidate_ref", "candidate_sha"}
    assert set(meta["embedding"]) == {"key", "shard"}


def _with_duplicates(meta, *, top_level=True):
    """A schema-3 metadata.json as schema 2 wrote it: each fact twice (or, with
    ``top_level`` false, only in the nested fields, as before the original's names)."""
    meta.update(
        schema_version=2,
        target="vllm-omni",
        started_at=tables._utc_iso(meta["start_time"], timespec="auto"),
        ended_at=tables._utc_iso(meta["end_time"], timespec="auto"),
        candidate_ref="HEAD",
        ids_dtype=meta["input_ids_dtype"],
    )
    meta["refs"] = {"baseline_ref": meta["baseline_ref"], "checked_out_commit": meta["checkout"]}
    meta["versions"].update({k: meta[k] for k in ("torch", "vllm", "transformers")})
    meta["embedding"].update(shape=meta["embedding_shape"], dtype=meta["dtype"])
    meta["refs"].update(baseline_sha="abc", candidate_sha="def")
    if not top_level:
        for key in ("baseline_ref", "checkout", "torch", "embedding_shape", "dtype"):
            del meta[key]


@pytest.mark.parametrize("top_level", [True, False], ids=["schema 2", "before top-level names"])
def test_old_metadata_with_duplicated_facts_renders_the_same(small_run_dir, tmp_path, top_level):
    new = _copy(small_run_dir, tmp_path / "v3")
    _edit(new / "metadata.json", lambda m: m.update(baseline_ref="v1", checkout="c0ffee"))
    _edit(new / "metadata.json", lambda m: m.update(target="vllm-omni", vllm="0.9"))
    _edit(
        new / "metadata.json",
        lambda m: m.update(
            refs={"baseline_sha": "abc", "candidate_ref": "HEAD", "candidate_sha": "def"}
        ),
    )
    old = _copy(new, tmp_path / "v2")
    _edit(old / "metadata.json", lambda m: _with_duplicates(m, top_level=top_level))
    assert inspect_results_dir(old).format == "embedbench"
    expected = tables.provenance_table(load_results(new))
    shown = tables.provenance_table(load_results(old))
    assert shown.equals(expected), shown.compare(expected)
    assert expected.loc["baseline ref", "value"] == "v1 (abc)"
    assert expected.loc["candidate ref", "value"] == "HEAD (def)"
    started = json.loads((old / "metadata.json").read_text())["started_at"]
    assert expected.loc["started", "value"] == started


def test_every_version_after_the_first_has_its_upgrade_step():
    assert sorted(upgrades.STEPS) == list(range(2, SCHEMA_VERSION + 1))
    assert list(schema.READABLE_VERSIONS) == list(range(1, SCHEMA_VERSION + 1))


def test_a_version_4_dir_reads_as_version_5_has_it(small_run_dir, tmp_path):
    """Before 5: no recorded timing window, and A/A records inside micro-raw.json."""
    new = load_results(small_run_dir)
    old = _copy(small_run_dir, tmp_path / "v4")
    aa_record = {**new.records[0], "scope": "aa_check", "variant": "baseline"}

    def downgrade(meta):
        meta["schema_version"] = 4
        meta.pop("timing_window", None)

    _edit(old / "metadata.json", downgrade)
    _edit(old / "micro-raw.json", lambda records: records.append(aa_record))
    read = load_results(old)
    assert read.metadata["timing_window"] == "legacy"
    assert read.records == new.records
    assert read.aa_records[-1] == aa_record and aa_record not in read.records
    # A current directory is read as written: its window and records stay as they are.
    assert (
        new.metadata["timing_window"]
        == json.loads((small_run_dir / "metadata.json").read_text())["timing_window"]
    )


def test_a_version_6_dir_reads_as_version_7_has_it(small_run_dir, tmp_path):
    """Before 7: work.json's rows have no instructions or simulated misses per call."""
    figures = ("instructions", "d1_misses", "ll_misses", "est_cycles")
    new = load_results(small_run_dir)
    assert new.work and all(row[name] is None for row in new.work for name in figures)
    old = _copy(small_run_dir, tmp_path / "v6")
    _edit(old / "metadata.json", lambda meta: meta.update(schema_version=6))
    _edit(old / "work.json", lambda rows: [row.pop(name) for row in rows for name in figures])
    inspect_results_dir(old)
    read = load_results(old)
    assert read.work == new.work
    assert tables.to_pr_markdown(tables.pr_table(read)) == tables.to_pr_markdown(
        tables.pr_table(new)
    )


@pytest.mark.parametrize("jsonschema_present", [True, False], ids=["checked", "unchecked"])
def test_a_dir_newer_than_the_code_is_refused_in_one_line(
    small_run_dir, tmp_path, monkeypatch, jsonschema_present
):
    newer = _copy(small_run_dir, tmp_path / "newer")
    _edit(newer / "metadata.json", lambda m: m.update(schema_version=SCHEMA_VERSION + 1))
    if not jsonschema_present:
        monkeypatch.setattr(schema, "available", lambda: False)
    for read in (load_results, inspect_results_dir):
        with pytest.raises(OutputDirError, match="newer embedbench") as refused:
            read(newer)
        assert "\n" not in str(refused.value)
        assert f"reads up to {SCHEMA_VERSION}" in str(refused.value)


@pytest.mark.parametrize("version", ["5", 0, 2.5, True])
def test_a_schema_version_that_is_not_a_version_is_refused(small_run_dir, tmp_path, version):
    odd = _copy(small_run_dir, tmp_path / "odd")
    _edit(odd / "metadata.json", lambda m: m.update(schema_version=version))
    with pytest.raises(OutputDirError, match="schema_version"):
        load_results(odd)


def test_the_cli_refuses_a_newer_dir_with_exit_2(small_run_dir, tmp_path):
    newer = _copy(small_run_dir, tmp_path / "newer")
    _edit(newer / "metadata.json", lambda m: m.update(schema_version=SCHEMA_VERSION + 1))
    res = subprocess.run(
        [sys.executable, "-m", "embedbench", "validate", str(newer)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "newer embedbench" in lines[0], res.stderr
