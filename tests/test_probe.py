"""The probe: placements, lookups and the syncs torch reports per case, no checkpoint."""

from __future__ import annotations

import dataclasses
import functools
import json
import warnings

import pytest
import torch

from embedbench import load_results
from embedbench.cases import CASES, SYNC_LABEL, VARIANTS
from embedbench.cli import main
from embedbench.harness import devices
from embedbench.measure import probe_row
from embedbench.omni import checkpoint, families, synthetic
from embedbench.omni.families import qwen3_omni, qwen25_omni
from embedbench.omni.scenarios import build_scenario, call_variant, placement_problems
from embedbench.omni.targets.reference import build_reference_target
from embedbench.probe import run_probe

CUDA = torch.device("cuda")  # a device object only: nothing runs on it here


class FakeSyncDebug:
    """Stands in for torch.cuda's sync debug mode, which only CUDA builds honour."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, start: int = 0) -> None:
        self.mode = start
        self.seen: list[object] = []
        monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: self.mode)
        monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", self.set)

    def set(self, mode: object) -> None:
        self.seen.append(mode)
        self.mode = mode


def _syncing_call(syncs: int, *, other_warnings: int = 0, fail: bool = False):
    def call() -> None:
        for _ in range(syncs):
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
        for _ in range(other_warnings):
            warnings.warn("something else", UserWarning, stacklevel=1)
        if fail:
            raise RuntimeError("boom")

    return call


def test_sync_count_is_none_off_cuda():
    assert devices.count_device_syncs(_syncing_call(3), torch.device("cpu")) is None


def test_sync_count_counts_only_sync_warnings_and_restores_the_mode(monkeypatch):
    debug = FakeSyncDebug(monkeypatch, start=2)
    assert devices.count_device_syncs(_syncing_call(2, other_warnings=3), CUDA) == 2
    assert debug.seen == ["warn", 2] and debug.mode == 2


def test_the_sync_count_is_labelled_a_lower_bound_wherever_it_is_shown():
    assert SYNC_LABEL == "syncs torch reports (a lower bound)"
    report = run_probe(family=qwen25_omni.NAME, device="cpu", tokens=300, hidden=16)
    header = report.table().splitlines()[0]
    assert "| syncs torch reports (a lower bound) in one call (baseline / fixed) |" in header
    assert "device syncs" not in header  # the unqualified name is gone
    assert {row["device_syncs_label"] for row in report.rows} == {SYNC_LABEL}


def test_sync_count_restores_the_mode_when_the_call_raises(monkeypatch):
    debug = FakeSyncDebug(monkeypatch, start=0)
    with pytest.raises(RuntimeError, match="boom"):
        devices.count_device_syncs(_syncing_call(1, fail=True), CUDA)
    assert debug.mode == 0


def _audio(family: str = qwen25_omni.NAME, hidden: int = 16):
    published = families.get(family)
    facts = checkpoint.facts_from_config(published.synthetic_config(hidden, published.vocab_size))
    table = synthetic.seeded_table(published.vocab_size, hidden, 1)
    target = build_reference_target(table, facts)
    scenario = build_scenario(
        "audio",
        300,
        token_ids=facts,
        hidden_size=hidden,
        tag=target.tag,
        deepstack_levels=facts.deepstack_levels,
    )
    return target, scenario


def test_placements_follow_the_pr_and_a_deviation_is_named():
    _, scenario = _audio()
    cpu = torch.device("cpu")
    assert placement_problems(scenario, cpu) == []
    wrong_ids = dataclasses.replace(scenario, input_ids=scenario.input_ids.long())
    assert placement_problems(wrong_ids, cpu) == [
        "input_ids are int64 on cpu, expected int32 on cpu"
    ]
    wrong_mask = dataclasses.replace(scenario, is_multimodal=scenario.is_multimodal.to("meta"))
    assert placement_problems(wrong_mask, cpu) == [
        "is_multimodal is bool on meta, expected bool on cpu"
    ]
    # On a CUDA run, CPU ids and rows are both wrong (and the CPU mask right).
    assert placement_problems(scenario, CUDA) == [
        "input_ids are int32 on cpu, expected int32 on cuda",
        "a multimodal embedding is on cpu, not cuda",
    ]


def test_a_probe_row_with_a_wrong_placement_is_not_ok():
    target, scenario = _audio()
    wrong = dataclasses.replace(scenario, input_ids=scenario.input_ids.long())
    calls = {v: functools.partial(call_variant, target.variants[v], wrong) for v in VARIANTS}
    row = probe_row(target, wrong, calls)
    assert row["calls"] == {"baseline": 2, "fixed": 1} and row["torch_equal"] is True
    assert row["ok"] is False
    assert row["mismatch"]["placements"] == ["input_ids are int64 on cpu, expected int32 on cpu"]
    assert row["device_syncs"] == {"baseline": None, "fixed": None}


@pytest.mark.parametrize("family", [qwen25_omni.NAME, qwen3_omni.NAME])
def test_the_probe_checks_every_case_of_each_family(family):
    report = run_probe(family=family, device="cpu", tokens=300, hidden=16)
    assert report.ok and [row["case"] for row in report.rows] == list(CASES)
    expected = families.get(family).expected_lookups
    for row in report.rows:
        assert row["calls"] == expected[row["case"]]
        assert row["placements"]["input_ids"] == "int32 on cpu"
        assert row["device_syncs"] == {"baseline": None, "fixed": None}
    table = report.table()
    assert "n/a (not CUDA)" in table and table.count("| ok |") == 6


def test_probe_command_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "probe.json"
    code = main(["probe", "--hidden", "16", "--tokens", "300", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("probe: qwen2.5-omni, cpu, 300 tokens, hidden 16, all cases ok")
    saved = json.loads(out.read_text())
    assert saved["ok"] is True and len(saved["rows"]) == 6


def test_probe_command_refuses_bad_input_in_one_line(capsys):
    assert main(["probe", "--tokens", "12"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("embedbench: error:") and "\n" not in err


@pytest.mark.e2e
def test_a_run_records_placements_and_device_syncs_per_case(small_run_dir):
    for row in load_results(small_run_dir).validation:
        assert row["placements"]["input_ids"] == "int32 on cpu"
        assert row["device_syncs"] == {"baseline": None, "fixed": None}  # CPU: not observable
        assert row["device_syncs_label"] == SYNC_LABEL
