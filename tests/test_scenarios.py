"""Scenario layouts, masks, ids and tagged embeddings against the layouts of docs/method.md."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from embedbench.errors import ConfigError
from embedbench.omni.scenarios import (
    CASE_LABELS,
    CASES,
    MIN_TOKENS,
    PLACEHOLDER_START,
    SEPARATOR_TOKENS,
    PlaceholderRun,
    Scenario,
    build_scenario,
    call_variant,
    fill_value,
    placeholder_runs,
)

AUDIO, IMAGE, VIDEO = 151646, 151655, 151656
TOKEN_IDS = SimpleNamespace(audio_token_id=AUDIO, image_token_id=IMAGE, video_token_id=VIDEO)
ID_OF = {"audio": AUDIO, "image": IMAGE, "video": VIDEO}
HIDDEN = 32


def tag(t: torch.Tensor, modality: str) -> torch.Tensor:
    t.modality = modality
    return t


def build(case: str, tokens: int = 1172, **kwargs) -> Scenario:
    return build_scenario(case, tokens, token_ids=TOKEN_IDS, hidden_size=HIDDEN, tag=tag, **kwargs)


# The scenario table, written out as explicit (modality, start, count) triples.
EXPECTED_RUNS = {
    "text": [],
    "audio": [("audio", 44, 100)],
    "image": [("image", 44, 16)],
    "video": [("video", 44, 128)],
    "mixed": [("audio", 44, 100), ("image", 146, 16), ("video", 164, 128)],
    "interleaved": [
        ("video", 44, 64),
        ("audio", 108, 50),
        ("video", 158, 64),
        ("audio", 222, 50),
    ],
}


def test_cases_and_labels():
    assert CASES == ("text", "audio", "image", "video", "mixed", "interleaved")
    assert CASE_LABELS == {
        "text": "Text",
        "audio": "Audio",
        "image": "Image",
        "video": "Video",
        "mixed": "Audio + image + video",
        "interleaved": "Interleaved audio/video",
    }
    assert MIN_TOKENS == 300
    assert PLACEHOLDER_START == 44
    assert SEPARATOR_TOKENS == 2


def test_fill_is_index_plus_one_as_the_pr_script_and_exact_in_bf16():
    assert [fill_value(i) for i in range(3)] == [1.0, 2.0, 3.0]
    for index in range(3):
        value = fill_value(index)
        assert torch.tensor(value, dtype=torch.bfloat16).item() == value


@pytest.mark.parametrize("case", CASES)
def test_placeholder_runs_match_spec(case):
    runs = placeholder_runs(case)
    assert all(isinstance(r, PlaceholderRun) for r in runs)
    assert [(r.modality, r.start, r.count) for r in runs] == EXPECTED_RUNS[case]


@pytest.mark.parametrize("case", ["mixed"])
def test_non_interleaved_runs_separated_by_two_text_tokens(case):
    runs = placeholder_runs(case)
    assert runs[0].start == PLACEHOLDER_START
    for before, after in itertools.pairwise(runs):
        assert after.start - (before.start + before.count) == 2


def test_interleaved_runs_contiguous_and_ordered():
    runs = placeholder_runs("interleaved")
    assert [r.modality for r in runs] == ["video", "audio", "video", "audio"]
    assert [r.count for r in runs] == [64, 50, 64, 50]
    assert runs[0].start == 44
    for before, after in itertools.pairwise(runs):
        assert after.start == before.start + before.count


@pytest.mark.parametrize("case", CASES)
def test_ids_and_mask_layout(case):
    scenario = build(case)
    ids = scenario.input_ids
    assert ids.dtype == torch.int32
    assert ids.device.type == "cpu"
    assert ids.shape == (1172,)
    assert scenario.case == case
    assert scenario.label == CASE_LABELS[case]
    assert scenario.tokens == 1172

    placeholder = torch.zeros(1172, dtype=torch.bool)
    for modality, start, count in EXPECTED_RUNS[case]:
        assert torch.all(ids[start : start + count] == ID_OF[modality])
        placeholder[start : start + count] = True
    text = ids[~placeholder]
    assert torch.all((text >= 2) & (text < 10000))

    if case == "text":
        assert scenario.is_multimodal is None
        assert scenario.multimodal_embeddings is None
        assert scenario.runs == ()
    else:
        mask = scenario.is_multimodal
        assert mask.dtype == torch.bool
        assert mask.device.type == "cpu"
        assert torch.equal(mask, placeholder)


def test_mixed_separators_are_text_tokens():
    ids = build("mixed").input_ids
    for position in (144, 145, 162, 163):
        assert 2 <= int(ids[position]) < 10000
    assert 2 <= int(ids[43]) < 10000
    assert 2 <= int(ids[292]) < 10000


def test_ids_seeded_by_length():
    first = build("audio", 1172).input_ids
    again = build("audio", 1172).input_ids
    assert torch.equal(first, again)
    other = build("audio", 1173).input_ids
    assert not torch.equal(first[:1172], other[:1172])


def test_ids_follow_the_documented_generator():
    generator = torch.Generator().manual_seed(7451 + 512)
    expected = torch.randint(2, 10000, (512,), generator=generator).to(torch.int32)
    assert torch.equal(build("text", 512).input_ids, expected)
    audio = build("audio", 512).input_ids
    assert torch.equal(audio[:44], expected[:44])
    assert torch.equal(audio[144:], expected[144:])


def test_text_ids_equal_across_cases_outside_placeholders():
    text = build("text").input_ids
    for case in CASES[1:]:
        scenario = build(case)
        assert torch.equal(
            scenario.input_ids[~scenario.is_multimodal], text[~scenario.is_multimodal]
        )


EXPECTED_EMBEDDINGS = {
    "audio": [("audio", 100)],
    "image": [("image", 16)],
    "video": [("video", 128)],
    "mixed": [("audio", 100), ("image", 16), ("video", 128)],
    "interleaved": [("video", 128), ("audio", 100)],
}


@pytest.mark.parametrize("case", CASES[1:])
def test_embeddings_one_per_modality_in_first_appearance_order(case):
    scenario = build(case)
    embeddings = scenario.multimodal_embeddings
    assert isinstance(embeddings, list)
    assert [(e.modality, e.shape[0]) for e in embeddings] == EXPECTED_EMBEDDINGS[case]
    assert scenario.modalities == tuple(m for m, _ in EXPECTED_EMBEDDINGS[case])
    for index, embedding in enumerate(embeddings):
        assert embedding.shape[1] == HIDDEN
        assert embedding.dtype == torch.bfloat16
        assert torch.all(embedding == index + 1)  # 1, 2, 3 in first-appearance order
    assert sum(e.shape[0] for e in embeddings) == int(scenario.is_multimodal.sum())


def test_tag_is_applied_and_dtype_honoured():
    seen = []

    def recording_tag(t, modality):
        seen.append((modality, t.dtype))
        return tag(t, modality)

    scenario = build_scenario(
        "mixed",
        400,
        token_ids=TOKEN_IDS,
        hidden_size=8,
        dtype=torch.float32,
        tag=recording_tag,
    )
    assert seen == [("audio", torch.float32), ("image", torch.float32), ("video", torch.float32)]
    assert all(e.dtype == torch.float32 for e in scenario.multimodal_embeddings)


@pytest.mark.parametrize("tokens", [0, 1, 299, -5])
def test_short_lengths_refused(tokens):
    with pytest.raises(ConfigError, match="at least 300") as info:
        build("audio", tokens)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("tokens", [299.0, "512", True, None])
def test_non_integer_lengths_refused(tokens):
    with pytest.raises(ConfigError):
        build("audio", tokens)


def test_unknown_case_refused():
    with pytest.raises(ConfigError) as info:
        build("speech")
    message = str(info.value)
    assert "unknown case 'speech'" in message
    assert "text, audio, image, video, mixed, interleaved" in message
    with pytest.raises(ConfigError):
        placeholder_runs("speech")


def test_bad_token_ids_refused():
    with pytest.raises(ConfigError, match="video_token_id"):
        build_scenario(
            "video",
            300,
            token_ids=SimpleNamespace(audio_token_id=1, image_token_id=2),
            hidden_size=HIDDEN,
            tag=tag,
        )
    with pytest.raises(ConfigError, match="differ"):
        build_scenario(
            "video",
            300,
            token_ids=SimpleNamespace(audio_token_id=1, image_token_id=1, video_token_id=3),
            hidden_size=HIDDEN,
            tag=tag,
        )


@pytest.mark.parametrize("tokens", [300, 512, 1172, 4096])
@pytest.mark.parametrize("case", CASES)
def test_lengths_work(case, tokens):
    scenario = build(case, tokens)
    assert scenario.input_ids.shape == (tokens,)
    if scenario.is_multimodal is not None:
        assert scenario.is_multimodal.shape == (tokens,)
        assert int(scenario.is_multimodal.sum()) == sum(c for _, _, c in EXPECTED_RUNS[case])


def test_call_variant_binds_arguments():
    received = {}

    def fn(input_ids, multimodal_embeddings, *, is_multimodal):
        received.update(ids=input_ids, mm=multimodal_embeddings, mask=is_multimodal)
        return torch.zeros(1)

    scenario = build("image")
    call_variant(fn, scenario)
    assert received["ids"] is scenario.input_ids
    assert received["mm"] is scenario.multimodal_embeddings
    assert received["mask"] is scenario.is_multimodal

    text = build("text")
    call_variant(fn, text)
    assert received["mm"] is None and received["mask"] is None


def test_device_placement_mask_stays_on_cpu():
    # The meta device stands in for an accelerator: ids and rows move, the mask does not.
    scenario = build("mixed", 512, device="meta")
    assert scenario.input_ids.device.type == "meta"
    assert scenario.input_ids.dtype == torch.int32
    assert all(e.device.type == "meta" for e in scenario.multimodal_embeddings)
    assert scenario.is_multimodal.device.type == "cpu"


# ----------------------------------------------------------------- DeepStack (Qwen3-Omni)

Q3_IDS = SimpleNamespace(audio_token_id=151675, image_token_id=151655, video_token_id=151656)


@pytest.mark.parametrize("case", CASES)
def test_deepstack_width_is_on_vision_embeddings_only(case):
    levels = 3
    scenario = build_scenario(
        case, 300, token_ids=Q3_IDS, hidden_size=HIDDEN, tag=tag, deepstack_levels=levels
    )
    assert scenario.deepstack_levels == levels
    for index, embedding in enumerate(scenario.multimodal_embeddings or []):
        vision = embedding.modality in ("image", "video")
        assert embedding.shape[1] == ((levels + 1) * HIDDEN if vision else HIDDEN)
        parts = embedding.split(HIDDEN, dim=-1)
        assert torch.equal(parts[0], torch.full_like(parts[0], fill_value(index)))
        fills = [float(p[0, 0]) for p in parts[1:]]
        assert all(
            torch.equal(p, torch.full_like(p, f)) for p, f in zip(parts[1:], fills, strict=True)
        )
        assert fills == [-(index + 1) - (level + 1) / 4 for level in range(len(fills))]
    if case != "text":
        ids = scenario.input_ids[scenario.is_multimodal].unique().tolist()
        assert set(ids) <= {151675, 151655, 151656}


def test_deepstack_scenario_gives_each_call_a_fresh_list():
    scenario = build_scenario(
        "image", 300, token_ids=Q3_IDS, hidden_size=HIDDEN, tag=tag, deepstack_levels=3
    )
    seen = []

    def wrapper(ids, embeddings, *, is_multimodal):
        seen.append(embeddings)
        embeddings[0] = embeddings[0][:, :HIDDEN]  # as Qwen3-Omni's wrapper does
        return ids

    call_variant(wrapper, scenario)
    call_variant(wrapper, scenario)
    assert seen[0] is not seen[1] and seen[0] is not scenario.multimodal_embeddings
    assert scenario.multimodal_embeddings[0].shape[1] == 4 * HIDDEN
    plain = build("image")
    call_variant(lambda ids, e, *, is_multimodal: seen.append(e), plain)
    assert seen[-1] is plain.multimodal_embeddings  # Qwen2.5-Omni: the list itself, as before


def test_deepstack_levels_must_be_a_count():
    with pytest.raises(ConfigError, match="deepstack_levels"):
        build("image", deepstack_levels=-1)
