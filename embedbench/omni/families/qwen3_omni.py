"""Qwen3-Omni: the MoE thinker of vLLM-Omni PR #7573, with DeepStack.

The values of the published config.json of Qwen/Qwen3-Omni-30B-A3B-Instruct,
https://huggingface.co/Qwen/Qwen3-Omni-30B-A3B-Instruct/blob/main/config.json
(model_type "qwen3_omni_moe"; thinker_config.text_config.vocab_size 152064 and
hidden_size 2048; thinker_config audio_token_id 151675, image_token_id 151655,
video_token_id 151656, audio_start_token_id 151669, audio_end_token_id 151670;
thinker_config.vision_config.deepstack_visual_indexes [8, 16, 24], out_hidden_size
2048). transformers' Qwen3OmniMoeThinkerConfig defaults differ (audio_token_id 151646,
the Qwen2.5 id): they are not the published model.

Text-only, empty multimodal and interleaved audio/video input keep a single lookup in
both forms; the other multimodal cases drop from two to one. Validation compares the
DeepStack buffer as well. The hooks: the replica forms and the real class's DeepStack
attributes (:mod:`embedbench.omni.families.replicas.qwen3_omni`), transformers'
``Qwen3OmniMoeThinkerConfig`` and what it must read back, vLLM's ``Qwen3MoeForCausalLM``
chain for the ``production`` shim.
"""

from __future__ import annotations

from typing import Any

from embedbench.cases import CASES
from embedbench.omni.families.spec import Family

__all__ = ["FAMILY", "NAME", "read_back"]

NAME = "qwen3-omni"


def read_back(config: Any, facts: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the config reads, what the checkpoint says): the token ids under their
    ``*_token_id`` names and the text hidden size (the class defaults are not the
    published model)."""
    names = ("audio_token_id", "image_token_id", "video_token_id")
    ids = (facts.audio_token_id, facts.image_token_id, facts.video_token_id)
    expected = dict(zip(names, ids, strict=True))
    seen = {name: getattr(config, name, None) for name in names}
    expected["hidden_size"] = facts.hidden_size
    seen["hidden_size"] = getattr(getattr(config, "text_config", None), "hidden_size", None)
    return seen, expected


FAMILY = Family(
    name=NAME,
    label="Qwen3-Omni",
    pr="#7573",
    model_type="qwen3_omni_moe",
    architecture="Qwen3OmniMoeForConditionalGeneration",
    thinker_model_type="qwen3_omni_moe_thinker",
    thinker_class="Qwen3OmniMoeThinkerForConditionalGeneration",
    thinker_module="vllm_omni.model_executor.models.qwen3_omni.qwen3_omni_moe_thinker",
    thinker_path="vllm_omni/model_executor/models/qwen3_omni/qwen3_omni_moe_thinker.py",
    published="Qwen/Qwen3-Omni-30B-A3B-Instruct",
    model_label="Qwen3-Omni-30B-A3B",
    published_config_url=(
        "https://huggingface.co/Qwen/Qwen3-Omni-30B-A3B-Instruct/blob/main/config.json"
    ),
    vocab_size=152064,
    hidden_size=2048,
    token_ids={
        "audio_token_id": 151675,
        "image_token_id": 151655,
        "video_token_id": 151656,
        "audio_start_token_id": 151669,
        "audio_end_token_id": 151670,
    },
    expected_lookups={
        case: (
            {"baseline": 1, "fixed": 1}
            if case in ("text", "interleaved")
            else {"baseline": 2, "fixed": 1}
        )
        for case in CASES
    },
    replica="embedbench.omni.families.replicas.qwen3_omni",
    thinker_config_class=(
        "transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe",
        "Qwen3OmniMoeThinkerConfig",
    ),
    read_back=read_back,
    production_language_model=(
        "vllm.model_executor.models.qwen3_moe",
        "Qwen3MoeForCausalLM",
        "Qwen3MoeModel",
    ),
    other_architectures=("Qwen3OmniMoeThinkerForConditionalGeneration",),
    deepstack_visual_indexes=(8, 16, 24),
    other_config={
        "talker_config": {"model_type": "qwen3_omni_moe_talker"},
        "code2wav_config": {},
    },
)
