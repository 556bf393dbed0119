"""The built-in replica: both wrapper forms against an independent oracle."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from helpers import AUDIO, IMAGE, TOKEN_IDS, VIDEO, VOCAB, seeded_table
from support.calltrace import python_calls

from embedbench.config import LM_SHIMS
from embedbench.omni.families.replicas.qwen25_omni import ReferenceThinker, ReferenceThinkerConfig
from embedbench.omni.scenarios import CASES, Scenario, build_scenario, call_variant
from embedbench.omni.targets import VARIANTS, Target, lookup_chain
from embedbench.omni.targets.reference import (
    FlatLanguageModel,
    ReferenceLanguageModel,
    ReferenceTextModel,
    ReferenceVocabEmbedding,
    SupportsMultiModalReplica,
    _get_mm_embedding_modalities,
    build_reference_target,
    check_interleaved_audio_video,
    tag_modality,
)
from embedbench.omni.validation import EXPECTED_LOOKUPS, count_lookups

HIDDEN = 32


@pytest.fixture(scope="module")
def table() -> torch.Tensor:
    return seeded_table(HIDDEN)


# Every test of the target runs on both language-model shims.
@pytest.fixture(scope="module", params=LM_SHIMS)
def target(table, request) -> Target:
    return build_reference_target(table, TOKEN_IDS, request.param)


def build(case: str, tokens: int = 1172) -> Scenario:
    return build_scenario(case, tokens, token_ids=TOKEN_IDS, hidden_size=HIDDEN, tag=tag_modality)


def oracle(table: torch.Tensor, scenario: Scenario) -> torch.Tensor:
    """Plain lookup, then each placeholder position gets the next row of its modality."""
    out = F.embedding(scenario.input_ids.long(), table).clone()
    if scenario.multimodal_embeddings is None:
        return out
    rows = {e.modality: e for e in scenario.multimodal_embeddings}
    next_row = {modality: 0 for modality in rows}
    for position in range(scenario.tokens):
        token = int(scenario.input_ids[position])
        modality = {AUDIO: "audio", IMAGE: "image", VIDEO: "video"}.get(token)
        if modality is None or not bool(scenario.is_multimodal[position]):
            continue
        out[position] = rows[modality][next_row[modality]]
        next_row[modality] += 1
    for modality, used in next_row.items():
        assert used == rows[modality].shape[0]
    return out


def with_distinct_rows(scenario: Scenario, seed: int = 1) -> Scenario:
    """Same scenario, but every multimodal row distinct, so row order is checked."""
    generator = torch.Generator().manual_seed(seed)
    embeddings = [
        tag_modality(
            torch.randn(e.shape, generator=generator).to(e.dtype) + 10.0 * (i + 1),
            e.modality,
        )
        for i, e in enumerate(scenario.multimodal_embeddings)
    ]
    return Scenario(
        case=scenario.case,
        label=scenario.label,
        tokens=scenario.tokens,
        input_ids=scenario.input_ids,
        is_multimodal=scenario.is_multimodal,
        multimodal_embeddings=embeddings,
        runs=scenario.runs,
    )


def masks(scenario: Scenario):
    ids = scenario.input_ids.cpu()
    is_video = scenario.is_multimodal & (ids == VIDEO)
    is_audio = scenario.is_multimodal & (ids == AUDIO)
    return is_video, is_audio, int(is_video.sum()), int(is_audio.sum())


def test_target_shape(target, table):
    assert target.name == "reference"
    assert set(target.variants) == set(VARIANTS)
    assert target.tag is tag_modality
    assert "0.28.0" in target.metadata["replica_of"]
    assert "0.30.0" in target.metadata["replica_of"]
    assert isinstance(target.model, ReferenceThinker)
    assert target.model.get_language_model() is target.language_model
    assert target.model._has_oov_mm_tokens is False
    assert target.model.config.video_token_index == VIDEO
    assert target.model.config.audio_token_index == AUDIO
    assert target.model.config.image_token_index == IMAGE


# lm_shim: the modules of one lookup, and the Python functions it enters (the real
# vLLM classes enter the same ones, tests/support/replica_check.py checks).
SHIMS = {
    "flat": (
        [FlatLanguageModel, ReferenceVocabEmbedding],
        ["FlatLanguageModel.embed_input_ids"],
    ),
    "production": (
        [ReferenceLanguageModel, ReferenceTextModel, ReferenceVocabEmbedding],
        [
            "ReferenceLanguageModel.embed_input_ids",
            "Module.__getattr__",  # self.model
            "ReferenceTextModel.embed_input_ids",
        ],
    ),
}
LOOKUP_TAIL = [
    "Module.__getattr__",  # self.embed_tokens
    "Module._wrapped_call_impl",
    "Module._call_impl",
    "ReferenceVocabEmbedding.forward",
    "_UnquantizedEmbeddingMethod.embedding",
    "Module.__getattr__",  # layer.weight
    "embedding",  # F.embedding
]


@pytest.mark.parametrize("lm_shim", LM_SHIMS)
def test_lm_shim_structure_and_call_depth(table, lm_shim):
    modules, head = SHIMS[lm_shim]
    language_model = build_reference_target(table, TOKEN_IDS, lm_shim).language_model
    assert [type(m) for m in lookup_chain(language_model)] == modules
    ids = torch.tensor([0, 5, AUDIO], dtype=torch.int32)
    assert python_calls(language_model.embed_input_ids, ids) == head + LOOKUP_TAIL


def test_lm_shim_metadata(table):
    flat = build_reference_target(table, TOKEN_IDS).metadata
    production = build_reference_target(table, TOKEN_IDS, "production").metadata
    embedding = "embedbench.omni.targets.reference.ReferenceVocabEmbedding"
    assert flat["lm_shim"] == "flat" and production["lm_shim"] == "production"
    assert flat["embedding_class"] == production["embedding_class"] == embedding
    assert flat["language_model_class"] == "embedbench.omni.targets.reference.FlatLanguageModel"
    assert production["language_model_class"].endswith("reference.ReferenceLanguageModel")
    assert flat["language_model"] == (
        "FlatLanguageModel.embed_input_ids -> ReferenceVocabEmbedding (TP=1)"
    )
    assert production["language_model"] == (
        "ReferenceLanguageModel.embed_input_ids -> ReferenceTextModel.embed_input_ids "
        "-> ReferenceVocabEmbedding (TP=1)"
    )


def test_unknown_lm_shim_is_refused(table):
    with pytest.raises(ValueError, match="unknown lm_shim 'deep'; choose from flat, production"):
        build_reference_target(table, TOKEN_IDS, "deep")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_both_shims_give_equal_outputs_and_lookup_counts(table, case, variant):
    outputs, counts = {}, {}
    for lm_shim in LM_SHIMS:
        target = build_reference_target(table, TOKEN_IDS, lm_shim)
        with count_lookups(target.language_model) as counter:
            outputs[lm_shim] = call_variant(target.variants[variant], build(case, 300))
        counts[lm_shim] = counter.count
    assert torch.equal(outputs["flat"], outputs["production"])
    assert counts["flat"] == counts["production"] == EXPECTED_LOOKUPS[case][variant]


def test_table_is_not_copied(target, table):
    weight = lookup_chain(target.language_model)[-1].weight
    assert weight.data_ptr() == table.data_ptr()
    assert weight.requires_grad is False
    assert target.language_model.table.data_ptr() == table.data_ptr()


def test_config_attribute_map_like_transformers():
    config = ReferenceThinkerConfig(audio_token_index=1, image_token_index=2, video_token_index=3)
    assert config.audio_token_id == 1 and config.image_token_id == 2 and config.video_token_id == 3
    config.video_token_id = 9
    assert config.video_token_index == 9


def test_language_model_lookup_is_f_embedding(target, table):
    ids = torch.tensor([0, 5, AUDIO, VOCAB - 1], dtype=torch.int32)
    assert torch.equal(target.language_model.embed_input_ids(ids), F.embedding(ids.long(), table))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_match_oracle(target, table, case, variant):
    scenario = build(case)
    with torch.inference_mode():
        out = call_variant(target.variants[variant], scenario)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, oracle(table, scenario))


@pytest.mark.parametrize("case", CASES[1:])
@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_match_oracle_with_distinct_rows(target, table, case, variant):
    scenario = with_distinct_rows(build(case, 512))
    out = call_variant(target.variants[variant], scenario)
    assert torch.equal(out, oracle(table, scenario))


@pytest.mark.parametrize("tokens", [300, 4096])
@pytest.mark.parametrize("case", CASES)
def test_baseline_and_fixed_equal(target, case, tokens):
    scenario = build(case, tokens)
    baseline = call_variant(target.variants["baseline"], scenario)
    fixed = call_variant(target.variants["fixed"], scenario)
    assert torch.equal(baseline, fixed)


def test_outputs_are_fresh_tensors(target, table):
    scenario = build("audio", 300)
    before = table.clone()
    first = call_variant(target.variants["fixed"], scenario)
    second = call_variant(target.variants["fixed"], scenario)
    assert first.data_ptr() != second.data_ptr()
    assert torch.equal(table, before)


@pytest.mark.parametrize("case", CASES[1:])
def test_interleave_check(case):
    expected = case == "interleaved"
    assert check_interleaved_audio_video(*masks(build(case))) is expected


def test_interleave_check_edge_cases():
    n = 20
    none = torch.zeros(n, dtype=torch.bool)
    video = none.clone()
    video[2:6] = True
    audio = none.clone()
    audio[6:10] = True
    # Adjacent but not interleaved: all video before all audio.
    assert check_interleaved_audio_video(video, audio, 4, 4) is False
    # Zero counts short-circuit.
    assert check_interleaved_audio_video(video, none, 4, 0) is False
    # V V A A V V in one span: interleaved.
    video2 = none.clone()
    video2[2:4] = True
    video2[6:8] = True
    audio2 = none.clone()
    audio2[4:6] = True
    assert check_interleaved_audio_video(video2, audio2, 4, 2) is True
    # The same tokens split by a boundary token: no span holds both around each other.
    video3 = none.clone()
    video3[2:4] = True
    video3[7:9] = True
    audio3 = none.clone()
    audio3[4:6] = True
    assert check_interleaved_audio_video(video3, audio3, 4, 2) is False
    # A later span that interleaves is found after a non-interleaved one.
    video4 = video.clone()
    video4[12:14] = True
    video4[15:17] = True
    audio4 = audio.clone()
    audio4[14] = True
    assert check_interleaved_audio_video(video4, audio4, 8, 5) is True


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    ("case", "index", "expected_fragment"),
    [
        ("audio", 0, "99 multimodal tokens to 100 placeholders"),
        ("mixed", 1, "243 multimodal tokens to 244 placeholders"),
        ("interleaved", 0, "127 video tokens to 128 placeholders"),
        ("interleaved", 1, "99 audio tokens to 100 placeholders"),
    ],
)
def test_row_count_mismatch_raises_value_error(target, variant, case, index, expected_fragment):
    scenario = build(case, 512)
    bad = scenario.multimodal_embeddings[index]
    scenario.multimodal_embeddings[index] = tag_modality(bad[:-1].clone(), bad.modality)
    with pytest.raises(ValueError, match=expected_fragment):
        call_variant(target.variants[variant], scenario)


@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_embedding_list_returns_plain_lookup(target, table, variant):
    scenario = build("audio", 300)
    out = target.variants[variant](scenario.input_ids, [], is_multimodal=scenario.is_multimodal)
    assert torch.equal(out, F.embedding(scenario.input_ids.long(), table))


@pytest.mark.parametrize("variant", VARIANTS)
def test_missing_mask_delegates_to_single_lookup(target, table, variant):
    scenario = build("audio", 300)
    out = target.variants[variant](scenario.input_ids, scenario.multimodal_embeddings)
    assert torch.equal(out, F.embedding(scenario.input_ids.long(), table))


@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_argument_super_reaches_replica_parent(target, table, variant):
    scenario = build("image", 300)
    parent = SupportsMultiModalReplica.embed_input_ids
    with mock.patch.object(
        SupportsMultiModalReplica, "embed_input_ids", autospec=True, side_effect=parent
    ) as spy:
        text = target.variants[variant](scenario.input_ids)
        merged = call_variant(target.variants[variant], scenario)
    assert spy.call_count == 2
    assert spy.call_args_list[0].args[0] is target.model
    assert torch.equal(text, F.embedding(scenario.input_ids.long(), table))
    assert torch.equal(merged, oracle(table, scenario))
    for name in ("embed_input_ids_baseline", "embed_input_ids_fixed"):
        assert "__class__" in getattr(ReferenceThinker, name).__code__.co_freevars


def test_tag_is_an_attribute_that_views_lose():
    t = tag_modality(torch.zeros(4, 2), "video")
    assert t.modality == "video"
    assert _get_mm_embedding_modalities([t]) == ["video"]
    with pytest.raises(ValueError, match="Missing modality on multimodal embedding at index 1"):
        _get_mm_embedding_modalities([t, t[1:]])


def test_untagged_rows_fail_on_interleaved_path_only(target):
    interleaved = build("interleaved", 300)
    interleaved.multimodal_embeddings = [e.clone() for e in interleaved.multimodal_embeddings]
    for variant in VARIANTS:
        with pytest.raises(ValueError, match="Missing modality"):
            call_variant(target.variants[variant], interleaved)
    mixed = build("mixed", 300)
    mixed.multimodal_embeddings = [e.clone() for e in mixed.multimodal_embeddings]
    for variant in VARIANTS:
        call_variant(target.variants[variant], mixed)


def test_standard_merge_casts_dtype_interleaved_does_not(table):
    target = build_reference_target(table, TOKEN_IDS)
    mixed = build_scenario(
        "mixed", 300, token_ids=TOKEN_IDS, hidden_size=HIDDEN, dtype=torch.float32, tag=tag_modality
    )
    out = call_variant(target.variants["fixed"], mixed)
    assert out.dtype == torch.bfloat16
    interleaved = build_scenario(
        "interleaved",
        300,
        token_ids=TOKEN_IDS,
        hidden_size=HIDDEN,
        dtype=torch.float32,
        tag=tag_modality,
    )
    with pytest.raises(RuntimeError):
        call_variant(target.variants["fixed"], interleaved)


def test_cpu_copy_of_ids_is_taken(target):
    scenario = build("video", 300)
    seen = []
    original = torch.Tensor.cpu

    def spy(self, *args, **kwargs):
        seen.append(self.dtype)
        return original(self, *args, **kwargs)

    for variant in VARIANTS:
        seen.clear()
        with mock.patch.object(torch.Tensor, "cpu", spy):
            call_variant(target.variants[variant], scenario)
        assert seen == [torch.int32]
