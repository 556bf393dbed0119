"""Atomic, refused and readable writes of the output directory."""

import json

import pytest

from embedbench.errors import OutputDirError
from embedbench.report.results import (
    AA_RAW,
    RESULT_FILES,
    WORK,
    ResultsWriter,
    check_output_dir,
    load_results,
    write_json_atomic,
)
from embedbench.report.schema import SCHEMA_VERSION


def test_writer_creates_all_five_files_and_updates_them(tmp_path):
    out = tmp_path / "run"
    writer = ResultsWriter(out, {"status": "running"})
    assert sorted(p.name for p in out.iterdir()) == sorted([*RESULT_FILES, WORK])
    writer.add_records([{"case": "timer"}])
    writer.add_validation({"case": "audio", "tokens": 300, "ok": True})
    writer.add_summary({"case": "audio", "tokens": 300, "valid": True})
    writer.update_metadata(status="complete")
    saved = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert saved["metadata.json"] == {"schema_version": SCHEMA_VERSION, "status": "complete"}
    assert saved["micro-raw.json"] == [{"case": "timer"}]
    assert saved["validation.json"] == [{"case": "audio", "tokens": 300, "ok": True}]
    assert saved["summary.json"] == [{"case": "audio", "tokens": 300, "valid": True}]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_aa_records_go_to_aa_raw_and_nothing_else_does(tmp_path):
    out = tmp_path / "run"
    writer = ResultsWriter(out, {"status": "running"}, aa_check=True)
    assert sorted(p.name for p in out.iterdir()) == sorted([*RESULT_FILES, WORK, AA_RAW])
    timer = {"case": "timer", "scope": "overhead"}
    ab = {"case": "audio", "scope": "whole_wrapper", "variant": "fixed"}
    aa = {"case": "audio", "scope": "aa_check", "variant": "fixed"}
    writer.add_records([timer])
    writer.add_records([ab, aa])
    assert json.loads((out / "micro-raw.json").read_text()) == [timer, ab]
    assert json.loads((out / "aa-raw.json").read_text()) == [aa]
    assert writer.records == [timer, ab] and writer.aa_records == [aa]


def test_a_run_without_the_aa_check_leaves_no_stale_aa_raw(tmp_path):
    ResultsWriter(tmp_path, {}, aa_check=True)
    ResultsWriter(tmp_path, {})  # a run without --aa, --overwrite into the same dir
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*RESULT_FILES, WORK])
    for name in (*RESULT_FILES, WORK):
        (tmp_path / name).unlink()
    write_json_atomic(tmp_path / AA_RAW, [])
    with pytest.raises(OutputDirError, match=r"aa-raw\.json"):  # counts as results too
        check_output_dir(tmp_path, overwrite=False)


def test_atomic_write_keeps_the_old_file_when_serialization_fails(tmp_path):
    path = tmp_path / "summary.json"
    write_json_atomic(path, [{"ok": True}])
    with pytest.raises(TypeError):
        write_json_atomic(path, [{"bad": object()}])
    assert json.loads(path.read_text()) == [{"ok": True}]
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_existing_results_are_refused_unless_overwrite(tmp_path):
    ResultsWriter(tmp_path, {})
    with pytest.raises(OutputDirError, match="--overwrite"):
        check_output_dir(tmp_path, overwrite=False)
    check_output_dir(tmp_path, overwrite=True)


def test_output_dir_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("keep me")
    with pytest.raises(OutputDirError, match="is a file"):
        check_output_dir(target, overwrite=True)
    assert target.read_text() == "keep me"


def test_an_empty_existing_dir_and_a_new_dir_are_accepted(tmp_path):
    check_output_dir(tmp_path, overwrite=False)
    check_output_dir(tmp_path / "a" / "b", overwrite=False)
    assert not (tmp_path / "a").exists()


def test_truncated_file_is_a_one_line_error(tmp_path):
    ResultsWriter(tmp_path, {})
    (tmp_path / "summary.json").write_text('[{"case": "au')
    with pytest.raises(OutputDirError, match="not valid JSON") as info:
        load_results(tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(OutputDirError, match="does not exist"):
        load_results(tmp_path / "missing")


def test_metadata_may_say_whether_processes_and_blocks_were_given_or_derived():
    from embedbench.report.schema import SCHEMA_VERSION, first_problem

    metadata = {
        "schema_version": SCHEMA_VERSION,
        "status": "complete",
        **{"warmup": 1, "blocks": 6, "iterations": 3, "lengths": [300], "cpu_core": 0},
        **{"metric_order": ["a", "b", "c"], "target": "reference", "device": "cpu"},
    }
    assert first_problem("metadata.json", metadata, "embedbench") is None  # optional
    for source in ("given", "derived"):
        both = {**metadata, "processes_source": source, "blocks_source": source}
        assert first_problem("metadata.json", both, "embedbench") is None
    for field in ("processes_source", "blocks_source"):
        problem = first_problem("metadata.json", {**metadata, field: "guessed"}, "embedbench")
        assert problem is not None and problem.startswith(f"metadata.json.{field}")
