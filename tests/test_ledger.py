"""The per-call ledger (embedbench/harness/ledger.py; docs/format.md, "work.json"): each
form's operators, bytes, syncs and kernels, counted exactly from one call.

On the replica of every registered family, for every case: the lookups each form makes,
the bytes the extra lookup writes, no syncs on the CPU, the same ledger from the same
code. On planted operators: views, gathers and scatters by their sizes. The workers'
merge, and the simulated host's ledger. No harness run.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from embedbench.cases import CASES, expected_lookups
from embedbench.config import RunConfig
from embedbench.harness.ledger import Ledger, count_pair, count_work, merge_workers
from embedbench.omni import checkpoint as ck
from embedbench.omni import families
from embedbench.omni.scenarios import build_scenario, call_variant
from embedbench.omni.synthetic import write_synthetic_checkpoint
from embedbench.omni.targets.reference import build_reference_target
from embedbench.omni.validation import validate_scenario
from embedbench.sim import SimulatedHost, sim_ledger, simulate_run

HIDDEN = 32
TOKENS = 300
BF16 = 2
INT64 = 8
FAMILIES = families.names()


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Each registered family's replica on a small synthetic table of its own."""
    built = {}
    for family in FAMILIES:
        path = write_synthetic_checkpoint(
            tmp_path_factory.mktemp("ledger") / family, hidden_size=HIDDEN, family=family
        )
        facts = ck.read_thinker_facts(path)
        table = ck.load_embedding_table(ck.locate_embedding(path, facts))
        built[family] = (facts, build_reference_target(table, facts, "flat"))
    return built


def _case(targets: dict, family: str, case: str):
    facts, target = targets[family]
    scenario = build_scenario(
        case,
        TOKENS,
        token_ids=facts,
        hidden_size=HIDDEN,
        tag=target.tag,
        deepstack_levels=facts.deepstack_levels,
    )
    calls = {name: (lambda f=f: call_variant(f, scenario)) for name, f in target.variants.items()}
    return target, scenario, calls


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("family", FAMILIES)
def test_each_form_runs_its_familys_lookups_and_the_extra_one_writes_its_rows(
    targets, family, case
):
    target, scenario, calls = _case(targets, family, case)
    with torch.inference_mode():  # as the timed calls run (isolation.isolated)
        validated = validate_scenario(target, scenario).to_json()
        ledger = count_pair(calls)
        again = count_pair(calls)
    expected = expected_lookups(family, case)
    assert {v: ledger[v]["ops"].get("aten.embedding", 0) for v in ledger} == expected
    assert {v: ledger[v]["ops"]["aten.embedding"] for v in ledger} == validated["calls"]
    assert again == ledger  # the same code, the same ledger
    baseline, fixed = ledger["baseline"], ledger["fixed"]
    assert baseline["syncs"] == fixed["syncs"] == 0  # nothing waits for a device on a CPU
    assert baseline["kernels"] is None and fixed["kernels"] is None
    extra = expected["baseline"] - expected["fixed"]
    rows = TOKENS * HIDDEN * BF16  # one lookup's output
    lookup = baseline["op_bytes"]["aten.embedding"]["written"]
    assert lookup - fixed["op_bytes"]["aten.embedding"]["written"] == extra * rows
    # The whole form: the extra lookup's rows and the ids it widens to int64, nothing else.
    assert baseline["bytes_written"] - fixed["bytes_written"] == extra * (rows + TOKENS * INT64)
    assert baseline["bytes_allocated"] - fixed["bytes_allocated"] == extra * (rows + TOKENS * INT64)
    if extra == 0:
        assert baseline == fixed  # the two forms do the same work


def test_views_gathers_and_scatters_count_the_bytes_they_touch():
    table = torch.zeros(1000, 4, dtype=torch.bfloat16)
    ids = torch.arange(10)  # int64: 80 bytes
    out = torch.zeros(10, 4, dtype=torch.bfloat16)  # 80 bytes
    mask = torch.zeros(10, dtype=torch.bool)
    mask[:3] = True
    values = torch.ones(3, 4, dtype=torch.bfloat16)  # 24 bytes
    with torch.inference_mode():
        gather = count_work(lambda: F.embedding(ids, table))
        view = count_work(lambda: out.view(-1))
        scatter = count_work(lambda: out.__setitem__(mask, values))
        scalar = count_work(lambda: ids.sum().item())
    # A gather reads its ids and the rows it returns, never its whole 8 kB table.
    assert gather.ops == {"aten.embedding": 1}
    assert (gather.bytes_read, gather.bytes_written, gather.bytes_allocated) == (160, 80, 80)
    assert (view.bytes_read, view.bytes_written, view.bytes_allocated) == (0, 0, 0)
    assert view.ops == {"aten.view": 1}
    # An in-place scatter writes the values it puts and allocates nothing.
    assert scatter.op_bytes["aten.index_put_"]["written"] == 24
    assert scatter.bytes_allocated == 0
    assert scalar.syncs == 0 and scalar.ops == {"aten.sum": 1, "aten.item": 1}


def test_a_call_that_raises_leaves_no_counter_behind():
    def broken() -> None:
        torch.ones(3) + 1
        raise ValueError("inside the form")

    with pytest.raises(ValueError, match="inside the form"):
        count_work(broken)
    after = count_work(lambda: None)
    assert after == Ledger()  # nothing counted outside a counted call
    torch.ones(2) * 2  # and torch dispatches as before


def test_callables_without_torch_operators_get_an_empty_ledger():
    ledger = count_pair({"baseline": lambda: sum(range(10)), "fixed": lambda: None})
    assert ledger["baseline"] == Ledger().to_json() == ledger["fixed"]
    assert ledger["fixed"]["ops"] == {} and ledger["fixed"]["kernels"] is None


def _pair(lookups: int) -> dict:
    return {"baseline": sim_ledger(2, TOKENS, HIDDEN), "fixed": sim_ledger(lookups, TOKENS, HIDDEN)}


def test_workers_that_agree_merge_into_one_ledger_each_named():
    merged = merge_workers({0: _pair(1), 1: _pair(1), 2: _pair(1)})
    assert set(merged) == {"baseline", "fixed"}
    for variant, row in merged.items():
        assert row["workers"] == [0, 1, 2] and row["workers_agree"] is True
        assert "differing" not in row
        assert {k: row[k] for k in _pair(1)[variant]} == _pair(1)[variant]


def test_a_worker_that_counts_differently_or_fails_is_named_not_fatal():
    merged = merge_workers({0: _pair(1), 1: None, 2: _pair(2)})
    fixed, baseline = merged["fixed"], merged["baseline"]
    assert fixed["ops"]["aten.embedding"] == 1  # the first worker's counts
    assert fixed["workers"] == [0, 2] and fixed["workers_agree"] is False
    assert fixed["differing"]["1"] == ["error"]
    assert {"ops", "bytes_written", "op_bytes"} <= set(fixed["differing"]["2"])
    assert baseline["differing"] == {"1": ["error"]}  # worker 2's baseline agrees
    assert merge_workers({0: None}) == {}


def test_the_simulated_host_reports_the_ledger_its_lookups_imply():
    config = RunConfig(cases=["text", "audio"], blocks=4, processes=2, lengths=TOKENS)
    result = simulate_run(config, SimulatedHost(), seed=3)
    hidden = families.default().hidden_size
    rows = {(r["case"], r["variant"]): r for r in result.work}
    assert set(rows) == {(c, v) for c in ("text", "audio") for v in ("baseline", "fixed")}
    for (case, variant), row in rows.items():
        lookups = expected_lookups(families.default().name, case)[variant]
        assert row["ops"]["aten.embedding"] == lookups
        assert row["workers"] == [0, 1] and row["workers_agree"] is True
    delta = rows[("audio", "baseline")]["bytes_written"] - rows[("audio", "fixed")]["bytes_written"]
    assert delta == TOKENS * hidden * BF16 + TOKENS * INT64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_scalar_read_is_a_sync_and_kernels_are_counted():
    x = torch.ones(1000, device="cuda")
    ledger = count_work(lambda: (x * 2).sum().item(), "cuda")
    assert ledger.syncs == 1  # .item() of a device tensor
    assert ledger.kernels is not None and ledger.kernels >= 2  # the multiply and the sum
    host = count_work(lambda: x.cpu(), "cuda")
    assert host.syncs == 1 and host.kernels == 0  # a copy to the CPU, no kernel
