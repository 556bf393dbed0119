"""Qwen2.5-Omni: the thinker of vLLM-Omni PR #7477, and the embedded default's family.

Facts of the published Qwen/Qwen2.5-Omni-7B config.json, the expected text lookups (the
text case delegates to the parent's single lookup in both forms; every multimodal case
costs the baseline a second one), the PR's published H100 table, and the hooks: the
replica forms (:mod:`embedbench.omni.families.replicas.qwen25_omni`), transformers'
``Qwen2_5OmniThinkerConfig`` and what it must read back, vLLM's ``Qwen2ForCausalLM``
chain for the ``production`` shim.
"""

from __future__ import annotations

from typing import Any

from embedbench.cases import CASES
from embedbench.omni.families.spec import Family

__all__ = ["FAMILY", "NAME", "REFERENCE_TABLE", "read_back"]

NAME = "qwen2.5-omni"


def read_back(config: Any, facts: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the config reads, what the checkpoint says) for the token ids the wrapper
    reads, under the ``*_token_index`` names of ``Qwen2_5OmniThinkerConfig``."""
    names = ("audio_token_index", "image_token_index", "video_token_index")
    ids = (facts.audio_token_id, facts.image_token_id, facts.video_token_id)
    expected = dict(zip(names, ids, strict=True))
    return {name: getattr(config, name, None) for name in names}, expected


# The PR's table: the Qwen2.5-Omni embedding microbenchmark README, reference results.
REFERENCE_TABLE: dict[str, Any] = {
    "source": "Qwen2.5-Omni embedding microbenchmark README "
    "(shared/seeds/000_9cc763e10d3d74ec.txt), reference results of vllm-omni PR #7477",
    "environment": {
        "gpu": "NVIDIA H100 80GB",
        "python": "3.12.3",
        "vllm": "0.29.0+cu129",
        "torch": "2.13.0+cu129",
        "transformers": "5.14.0",
        "model": "Qwen/Qwen2.5-Omni-7B",
        "dtype": "bfloat16",
        "date": "September 13 (2026)",
    },
    "method": {
        "warmup": 50,
        "blocks": 20,
        "iterations": 20,
        "statistic": "median of block medians of host-observed latency",
    },
    "tokens": 1172,
    "rows": [
        {"case": "text", "label": "Text", "before_us": 18.81, "after_us": 18.66,
         "reduction_pct": 0.80},
        {"case": "audio", "label": "Audio", "before_us": 104.32, "after_us": 85.30,
         "reduction_pct": 18.23},
        {"case": "image", "label": "Image", "before_us": 104.72, "after_us": 86.27,
         "reduction_pct": 17.62},
        {"case": "video", "label": "Video", "before_us": 104.73, "after_us": 85.76,
         "reduction_pct": 18.11},
        {"case": "mixed", "label": "Audio + image + video", "before_us": 567.92,
         "after_us": 549.54, "reduction_pct": 3.24},
        {"case": "interleaved", "label": "Interleaved audio/video", "before_us": 622.76,
         "after_us": 597.84, "reduction_pct": 4.00},
    ],
}  # fmt: skip

FAMILY = Family(
    name=NAME,
    label="Qwen2.5-Omni",
    pr="#7477",
    model_type="qwen2_5_omni",
    architecture="Qwen2_5OmniModel",
    thinker_model_type="qwen2_5_omni_thinker",
    thinker_class="Qwen2_5OmniThinkerForConditionalGeneration",
    thinker_module="vllm_omni.model_executor.models.qwen2_5_omni.qwen2_5_omni_thinker",
    thinker_path="vllm_omni/model_executor/models/qwen2_5_omni/qwen2_5_omni_thinker.py",
    published="Qwen/Qwen2.5-Omni-7B",
    model_label="Qwen2.5-Omni-7B",
    published_config_url="https://huggingface.co/Qwen/Qwen2.5-Omni-7B/blob/main/config.json",
    vocab_size=152064,
    hidden_size=3584,
    token_ids={
        "audio_token_index": 151646,
        "image_token_index": 151655,
        "video_token_index": 151656,
        "audio_start_token_id": 151647,
        "audio_end_token_id": 151648,
    },
    expected_lookups={
        case: {"baseline": 1, "fixed": 1} if case == "text" else {"baseline": 2, "fixed": 1}
        for case in CASES
    },
    replica="embedbench.omni.families.replicas.qwen25_omni",
    thinker_config_class=(
        "transformers.models.qwen2_5_omni.configuration_qwen2_5_omni",
        "Qwen2_5OmniThinkerConfig",
    ),
    read_back=read_back,
    production_language_model=(
        "vllm.model_executor.models.qwen2",
        "Qwen2ForCausalLM",
        "Qwen2Model",
    ),
    other_architectures=(
        "Qwen2_5OmniForConditionalGeneration",
        "Qwen2_5OmniThinkerForConditionalGeneration",
    ),
    other_config={
        "talker_config": {"model_type": "qwen2_5_omni_talker"},
        "token2wav_config": {"model_type": "qwen2_5_omni_token2wav"},
    },
    reference_table=REFERENCE_TABLE,
    default=True,
)
