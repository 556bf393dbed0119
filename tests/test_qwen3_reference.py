"""The built-in Qwen3-Omni replica (docs/families.md): both forms, the DeepStack split and buffer,
and validation of outputs and buffers with the family's expected lookups."""

from __future__ import annotations

from pathlib import Path
from types import MethodType

import pytest
import torch

from embedbench.cases import CASES, expected_lookups
from embedbench.config import LM_SHIMS
from embedbench.omni import checkpoint as ck
from embedbench.omni import synthetic
from embedbench.omni.families.qwen3_omni import NAME as QWEN3_OMNI
from embedbench.omni.families.replicas.qwen3_omni import (
    DEEPSTACK_BUFFER_ROWS,
    ReferenceQwen3Thinker,
)
from embedbench.omni.scenarios import build_scenario, call_variant, deepstack_fill_value, fill_value
from embedbench.omni.targets.reference import build_reference_target
from embedbench.omni.validation import count_lookups, take_deepstack_buffer, validate_scenario

HIDDEN = 16
LEVELS = 3


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory):
    path = synthetic.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("q3") / "ckpt", hidden_size=HIDDEN, family=QWEN3_OMNI
    )
    facts = ck.read_thinker_facts(path)
    table = ck.load_embedding_table(ck.locate_embedding(path, facts))
    return facts, table


def _scenario(facts, target, case: str, tokens: int = 300):
    return build_scenario(
        case,
        tokens,
        token_ids=facts,
        hidden_size=HIDDEN,
        tag=target.tag,
        deepstack_levels=facts.deepstack_levels,
    )


def test_facts_pick_the_qwen3_replica(qwen3):
    facts, table = qwen3
    target = build_reference_target(table, facts)
    assert isinstance(target.model, ReferenceQwen3Thinker)
    assert target.family == QWEN3_OMNI
    assert "Qwen3OmniMoeThinkerForConditionalGeneration" in target.metadata["replica_of"]
    assert target.model.visual.deepstack_visual_indexes == [8, 16, 24]
    assert target.language_model.table.data_ptr() == table.data_ptr()
    buffers = target.model.deepstack_input_embeds
    assert len(buffers) == LEVELS
    assert all(b.shape == (DEEPSTACK_BUFFER_ROWS, HIDDEN) for b in buffers)
    assert all(b.dtype == torch.bfloat16 for b in buffers)


@pytest.mark.parametrize("lm_shim", LM_SHIMS)
@pytest.mark.parametrize("case", CASES)
def test_every_case_validates_with_the_family_counts(qwen3, case, lm_shim):
    facts, table = qwen3
    target = build_reference_target(table, facts, lm_shim)
    result = validate_scenario(target, _scenario(facts, target, case))
    assert result.ok, result.mismatch
    assert result.calls == expected_lookups(QWEN3_OMNI, case)
    row = result.to_json()
    assert row["family"] == QWEN3_OMNI
    assert row["compared"] == ["output", "deepstack_buffer"]
    assert row["deepstack_equal"] is True


@pytest.mark.parametrize("case", CASES)
def test_outputs_and_buffer_hold_what_the_inputs_say(qwen3, case):
    """Text rows are the table's rows, placeholders the main-scale fills; the buffer holds
    each DeepStack level's fill at vision positions and zeros elsewhere."""
    facts, table = qwen3
    target = build_reference_target(table, facts)
    scenario = _scenario(facts, target, case)
    ids = scenario.input_ids.long()
    for variant in ("baseline", "fixed"):
        take_deepstack_buffer(target.model)
        with torch.inference_mode():
            out = call_variant(target.variants[variant], scenario)
        buffer = take_deepstack_buffer(target.model)
        expected = table[ids].clone()
        levels = torch.zeros(LEVELS, len(ids), HIDDEN, dtype=torch.bfloat16)
        order = scenario.modalities
        vision = False
        for run in scenario.runs:
            index = order.index(run.modality)
            expected[run.start : run.stop] = fill_value(index)
            if run.modality in ("image", "video"):
                vision = True
                for level in range(LEVELS):
                    levels[level, run.start : run.stop] = deepstack_fill_value(index, level, LEVELS)
        assert torch.equal(out, expected) and out.dtype == torch.bfloat16
        if vision:
            assert buffer is not None and torch.equal(buffer, levels)
        else:
            assert buffer is None
    # The scenario's list still holds the full-width tensors (each call got a copy).
    for embedding in scenario.multimodal_embeddings or []:
        wide = embedding.modality in ("image", "video")
        assert embedding.shape[1] == ((LEVELS + 1) * HIDDEN if wide else HIDDEN)


def test_the_buffer_grows_for_a_long_input(qwen3):
    facts, table = qwen3
    target = build_reference_target(table, facts)
    tokens = DEEPSTACK_BUFFER_ROWS + 100
    result = validate_scenario(target, _scenario(facts, target, "image", tokens))
    assert result.ok, result.mismatch
    assert target.model.deepstack_input_embeds[0].shape[0] == tokens


def test_validation_catches_a_wrong_buffer(qwen3):
    facts, table = qwen3
    target = build_reference_target(table, facts)
    original = target.variants["fixed"]

    def corrupt(self, *args, **kwargs):
        out = original(*args, **kwargs)
        if self.deepstack_input_embeds_num_tokens:
            self.deepstack_input_embeds[1][50] += 1
        return out

    target.variants["fixed"] = MethodType(corrupt, target.model)
    result = validate_scenario(target, _scenario(facts, target, "image"))
    assert not result.ok and result.torch_equal and result.deepstack_equal is False
    assert result.mismatch["deepstack_buffer"]["first_differing_position"] == 50


def test_validation_catches_a_missing_buffer(qwen3):
    facts, table = qwen3
    target = build_reference_target(table, facts)
    original = target.variants["fixed"]

    def forgets(self, *args, **kwargs):
        out = original(*args, **kwargs)
        take_deepstack_buffer(self)
        return out

    target.variants["fixed"] = MethodType(forgets, target.model)
    result = validate_scenario(target, _scenario(facts, target, "video"))
    assert not result.ok
    assert result.mismatch["deepstack_buffer"] == {
        "baseline": "set",
        "fixed": "not set",
        "expected": "set",
    }


def test_validation_expects_the_family_counts(qwen3):
    """Interleaved audio/video keeps one lookup in Qwen3-Omni's baseline: a baseline that
    looks up twice there fails validation."""
    facts, table = qwen3
    target = build_reference_target(table, facts)
    original = target.variants["baseline"]

    def twice(self, ids, *args, **kwargs):
        self.language_model.embed_input_ids(ids)
        return original(ids, *args, **kwargs)

    target.variants["baseline"] = MethodType(twice, target.model)
    result = validate_scenario(target, _scenario(facts, target, "interleaved"))
    assert result.mismatch["lookup_counts"] == {"baseline": {"observed": 2, "expected": 1}}


def test_qwen25_rows_compare_the_output_only(small_checkpoint: Path):
    facts = ck.read_thinker_facts(small_checkpoint)
    table = ck.load_embedding_table(ck.locate_embedding(small_checkpoint, facts))
    target = build_reference_target(table, facts)
    scenario = build_scenario(
        "image", 300, token_ids=facts, hidden_size=facts.hidden_size, tag=target.tag
    )
    row = validate_scenario(target, scenario).to_json()
    assert row["ok"] and row["family"] == "qwen2.5-omni" and row["compared"] == ["output"]
    assert "deepstack_equal" not in row


def test_text_lookups_counted_through_the_language_model(qwen3):
    facts, table = qwen3
    target = build_reference_target(table, facts)
    scenario = _scenario(facts, target, "mixed")
    with torch.inference_mode(), count_lookups(target.language_model) as counter:
        call_variant(target.variants["baseline"], scenario)
        call_variant(target.variants["fixed"], scenario)
    assert counter.count == 3
