"""Lookup counting and mismatch recording."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from helpers import TOKEN_IDS, seeded_table

from embedbench.omni.scenarios import CASES, Scenario, build_scenario, call_variant
from embedbench.omni.targets import Target
from embedbench.omni.targets.reference import build_reference_target, tag_modality
from embedbench.omni.validation import (
    EXPECTED_LOOKUPS,
    LookupCounter,
    ValidationResult,
    count_lookups,
    validate_scenario,
)

HIDDEN = 32


@pytest.fixture(scope="module")
def table() -> torch.Tensor:
    return seeded_table(HIDDEN)


@pytest.fixture
def target(table) -> Target:
    return build_reference_target(table, TOKEN_IDS)


def build(case: str, tokens: int = 1172) -> Scenario:
    return build_scenario(case, tokens, token_ids=TOKEN_IDS, hidden_size=HIDDEN, tag=tag_modality)


def with_fixed(target: Target, fixed) -> Target:
    return Target(
        name=target.name,
        model=target.model,
        language_model=target.language_model,
        variants={"baseline": target.variants["baseline"], "fixed": fixed},
        tag=target.tag,
        metadata=target.metadata,
    )


def test_expected_lookups_table():
    assert EXPECTED_LOOKUPS["text"] == {"baseline": 1, "fixed": 1}
    for case in CASES[1:]:
        assert EXPECTED_LOOKUPS[case] == {"baseline": 2, "fixed": 1}
    assert set(EXPECTED_LOOKUPS) == set(CASES)


@pytest.mark.parametrize("tokens", [300, 1172])
@pytest.mark.parametrize("case", CASES)
def test_reference_validates(target, case, tokens):
    result = validate_scenario(target, build(case, tokens))
    assert isinstance(result, ValidationResult)
    assert result.case == case and result.tokens == tokens
    assert result.calls == EXPECTED_LOOKUPS[case]
    assert result.expected_calls == EXPECTED_LOOKUPS[case]
    assert result.torch_equal is True
    assert result.ok is True
    assert result.mismatch is None
    payload = result.to_json()
    assert json.loads(json.dumps(payload)) == payload
    assert payload["calls"] == EXPECTED_LOOKUPS[case]
    assert payload["ok"] is True
    assert result.device == payload["device"] == "cpu"  # as the original's rows carry it


def test_validation_leaves_language_model_untouched(target):
    validate_scenario(target, build("mixed", 300))
    assert "embed_input_ids" not in vars(target.language_model)


@pytest.mark.parametrize("variant", ["baseline", "fixed"])
def test_empty_list_is_one_lookup(target, variant):
    scenario = build("audio", 300)
    with count_lookups(target.language_model) as counter:
        target.variants[variant](scenario.input_ids, [], is_multimodal=scenario.is_multimodal)
    assert counter.count == 1


def test_count_lookups_counts_and_restores(target):
    lm = target.language_model
    ids = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert "embed_input_ids" not in vars(lm)
    with count_lookups(lm) as counter:
        assert isinstance(counter, LookupCounter)
        assert "embed_input_ids" in vars(lm)
        lm.embed_input_ids(ids)
        lm.embed_input_ids(ids)
        assert counter.count == 2
        counter.reset()
        assert counter.count == 0
    assert "embed_input_ids" not in vars(lm)
    assert lm.embed_input_ids.__func__ is type(lm).embed_input_ids


def test_count_lookups_restores_on_error(target):
    lm = target.language_model
    with pytest.raises(RuntimeError, match="boom"), count_lookups(lm):
        raise RuntimeError("boom")
    assert "embed_input_ids" not in vars(lm)


def test_count_lookups_restores_existing_instance_attribute():
    calls = []

    def own(ids):
        calls.append(ids)
        return ids

    lm = SimpleNamespace(embed_input_ids=own)
    with count_lookups(lm) as outer:
        with pytest.raises(ValueError), count_lookups(lm) as inner:
            lm.embed_input_ids(1)
            raise ValueError
        assert lm.embed_input_ids is not own
        lm.embed_input_ids(2)
    assert lm.embed_input_ids is own
    assert (outer.count, inner.count) == (2, 1)
    assert calls == [1, 2]


def test_fixed_with_two_lookups_fails_counts(target):
    broken = with_fixed(target, target.variants["baseline"])
    result = validate_scenario(broken, build("audio", 300))
    assert result.ok is False
    assert result.torch_equal is True
    assert result.calls == {"baseline": 2, "fixed": 2}
    assert result.mismatch == {"lookup_counts": {"fixed": {"observed": 2, "expected": 1}}}


def test_wrong_rows_reported(target):
    fixed = target.variants["fixed"]

    def off_by_one_row(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        out = fixed(input_ids, multimodal_embeddings, is_multimodal=is_multimodal)
        out[50] += 1.0  # audio placeholder row: fill 1.0 becomes 2.0
        out[60, 3] -= 0.5
        return out

    result = validate_scenario(with_fixed(target, off_by_one_row), build("audio", 300))
    assert result.ok is False
    assert result.torch_equal is False
    assert result.calls == {"baseline": 2, "fixed": 1}
    outputs = result.mismatch["outputs"]
    assert outputs["first_differing_position"] == 50
    assert outputs["differing_positions"] == 2
    assert outputs["max_abs_diff"] == 1.0
    assert "lookup_counts" not in result.mismatch
    json.dumps(result.to_json())


def test_text_only_lookup_in_place_of_merge_reported(target, table):
    def no_merge(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        return target.language_model.embed_input_ids(input_ids)

    result = validate_scenario(with_fixed(target, no_merge), build("video", 300))
    assert result.ok is False
    assert result.mismatch["outputs"]["first_differing_position"] == 44
    assert result.mismatch["outputs"]["differing_positions"] == 128
    scenario = build("video", 300)
    # The video case has one embedding, the first in appearance order: filled with 1.
    expected = (
        (F.embedding(scenario.input_ids.long(), table)[44:172].double() - 1.0).abs().max().item()
    )
    assert result.mismatch["outputs"]["max_abs_diff"] == expected


def test_shape_and_dtype_difference_reported(target):
    fixed = target.variants["fixed"]

    def short(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        return fixed(input_ids, multimodal_embeddings, is_multimodal=is_multimodal)[:-1]

    def wider(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        return fixed(input_ids, multimodal_embeddings, is_multimodal=is_multimodal).float()

    result = validate_scenario(with_fixed(target, short), build("text", 300))
    assert result.ok is False
    assert result.mismatch["outputs"]["shape"] == {"baseline": [300, 32], "fixed": [299, 32]}

    result = validate_scenario(with_fixed(target, wider), build("image", 300))
    assert result.ok is False
    assert result.torch_equal is True  # equal values; only the dtype differs
    assert result.mismatch["outputs"]["dtype"] == {
        "baseline": "torch.bfloat16",
        "fixed": "torch.float32",
    }


def test_raising_variant_is_recorded(target):
    def raising(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        raise ValueError("boom\nsecond line")

    result = validate_scenario(with_fixed(target, raising), build("mixed", 300))
    assert result.ok is False
    assert result.torch_equal is False
    assert result.mismatch["error"] == "fixed raised ValueError: boom"
    assert result.calls["baseline"] == 2
    assert result.mismatch["lookup_counts"] == {"fixed": {"observed": 0, "expected": 1}}
    assert "embed_input_ids" not in vars(target.language_model)


def test_real_error_from_replica_is_recorded(target):
    scenario = build("interleaved", 300)
    video = scenario.multimodal_embeddings[0]
    scenario.multimodal_embeddings[0] = tag_modality(video[:-1].clone(), "video")
    result = validate_scenario(target, scenario)
    assert result.ok is False
    assert result.mismatch["error"] == (
        "baseline raised ValueError: Attempted to assign 127 video tokens to 128 placeholders; "
        "fixed raised ValueError: Attempted to assign 127 video tokens to 128 placeholders"
    )


def test_validation_runs_in_inference_mode(target):
    seen = []
    fixed = target.variants["fixed"]

    def recording(input_ids, multimodal_embeddings=None, *, is_multimodal=None):
        seen.append(torch.is_inference_mode_enabled())
        return fixed(input_ids, multimodal_embeddings, is_multimodal=is_multimodal)

    assert validate_scenario(with_fixed(target, recording), build("text", 300)).ok
    assert seen == [True]
    assert not torch.is_inference_mode_enabled()
    # The result still compares equal to a call made outside the harness.
    scenario = build("text", 300)
    assert torch.equal(call_variant(fixed, scenario), call_variant(recording, scenario))
