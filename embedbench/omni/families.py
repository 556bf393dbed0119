"""The model families embedbench measures, and what each needs on the run side.

A family is one thinker whose ``embed_input_ids`` repeated the text-embedding lookup
(vLLM-Omni issue #7451): Qwen2.5-Omni (fixed by PR #7477) and Qwen3-Omni (fixed by PR
#7573). Per family: the checkpoint's ``model_type``, the thinker class and its source
path in vLLM-Omni, the ``thinker_config`` keys of the token ids, the published geometry
and token ids (what a synthetic checkpoint is written with), whether DeepStack applies,
and the expected text lookups per case (baseline -> fixed). The names, labels and
expected lookups the report side shows are torch-free, in :mod:`embedbench.cases`.

The family of a checkpoint comes from its config.json (:func:`family_of_config`);
``--family auto`` takes it from there, and a named family that the checkpoint
contradicts is refused with one line (:func:`check_family`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedbench.cases import (
    AUTO_FAMILY,
    DEFAULT_FAMILY,
    EXPECTED_LOOKUPS_BY_FAMILY,
    FAMILIES,
    FAMILY_LABELS,
    FAMILY_MODEL_TYPES,
    FAMILY_PRS,
    QWEN3_OMNI,
    QWEN25_OMNI,
)
from embedbench.errors import ConfigError


@dataclass(frozen=True)
class Family:
    """What the run side knows about one thinker family."""

    name: str
    model_type: str
    architecture: str
    thinker_model_type: str
    # The thinker class whose embed_input_ids is measured, and where it lives in vllm-omni.
    thinker_class: str
    thinker_module: str
    thinker_path: str
    # The published checkpoint the synthetic one stands in for, and its text table.
    published: str
    published_config_url: str
    vocab_size: int
    hidden_size: int
    # thinker_config's token ids as the published config.json spells and sets them.
    token_ids: dict[str, int] = field(hash=False)
    # The published thinker_config.vision_config.deepstack_visual_indexes (empty: no
    # DeepStack). Vision embeddings then carry (len + 1) x hidden features.
    deepstack_visual_indexes: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return FAMILY_LABELS[self.name]

    @property
    def pr(self) -> str:
        return FAMILY_PRS[self.name]

    @property
    def deepstack(self) -> bool:
        return bool(self.deepstack_visual_indexes)

    @property
    def expected_lookups(self) -> dict[str, dict[str, int]]:
        """Text lookups per call, per case and variant (baseline -> fixed)."""
        return EXPECTED_LOOKUPS_BY_FAMILY[self.name]

    def synthetic_config(self, hidden_size: int, vocab_size: int) -> dict[str, Any]:
        """config.json of a synthetic checkpoint of this family (without the marker):
        the published layout, model types and token ids; only the sizes are the caller's."""
        thinker: dict[str, Any] = {
            "model_type": self.thinker_model_type,
            **self.token_ids,
            "text_config": {
                "model_type": f"{self.thinker_model_type.removesuffix('_thinker')}_text",
                "hidden_size": hidden_size,
                "vocab_size": vocab_size,
                "torch_dtype": "bfloat16",
            },
        }
        if self.deepstack:
            thinker["vision_config"] = {
                "model_type": f"{self.model_type}_vision_encoder",
                "deepstack_visual_indexes": list(self.deepstack_visual_indexes),
                # The vision merger projects to the text width (published: 2048 = hidden).
                "out_hidden_size": hidden_size,
            }
        config: dict[str, Any] = {
            "architectures": [self.architecture],
            "model_type": self.model_type,
            "torch_dtype": "bfloat16",
            "thinker_config": thinker,
        }
        if self.name == QWEN25_OMNI:
            config["talker_config"] = {"model_type": "qwen2_5_omni_talker"}
            config["token2wav_config"] = {"model_type": "qwen2_5_omni_token2wav"}
        else:
            config["talker_config"] = {"model_type": "qwen3_omni_moe_talker"}
            config["code2wav_config"] = {}
        return config


QWEN25 = Family(
    name=QWEN25_OMNI,
    model_type=FAMILY_MODEL_TYPES[QWEN25_OMNI],
    architecture="Qwen2_5OmniModel",
    thinker_model_type="qwen2_5_omni_thinker",
    thinker_class="Qwen2_5OmniThinkerForConditionalGeneration",
    thinker_module="vllm_omni.model_executor.models.qwen2_5_omni.qwen2_5_omni_thinker",
    thinker_path="vllm_omni/model_executor/models/qwen2_5_omni/qwen2_5_omni_thinker.py",
    published="Qwen/Qwen2.5-Omni-7B",
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
)

# Qwen3-Omni: the values of the published config.json of Qwen/Qwen3-Omni-30B-A3B-Instruct,
# https://huggingface.co/Qwen/Qwen3-Omni-30B-A3B-Instruct/blob/main/config.json
# (model_type "qwen3_omni_moe"; thinker_config.text_config.vocab_size 152064 and
# hidden_size 2048; thinker_config audio_token_id 151675, image_token_id 151655,
# video_token_id 151656, audio_start_token_id 151669, audio_end_token_id 151670;
# thinker_config.vision_config.deepstack_visual_indexes [8, 16, 24], out_hidden_size
# 2048). transformers' Qwen3OmniMoeThinkerConfig defaults differ (audio_token_id 151646,
# the Qwen2.5 id): they are not the published model.
QWEN3 = Family(
    name=QWEN3_OMNI,
    model_type=FAMILY_MODEL_TYPES[QWEN3_OMNI],
    architecture="Qwen3OmniMoeForConditionalGeneration",
    thinker_model_type="qwen3_omni_moe_thinker",
    thinker_class="Qwen3OmniMoeThinkerForConditionalGeneration",
    thinker_module="vllm_omni.model_executor.models.qwen3_omni.qwen3_omni_moe_thinker",
    thinker_path="vllm_omni/model_executor/models/qwen3_omni/qwen3_omni_moe_thinker.py",
    published="Qwen/Qwen3-Omni-30B-A3B-Instruct",
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
    deepstack_visual_indexes=(8, 16, 24),
)

FAMILY: dict[str, Family] = {QWEN25_OMNI: QWEN25, QWEN3_OMNI: QWEN3}
assert tuple(FAMILY) == FAMILIES

_BY_MODEL_TYPE = {f.model_type: f.name for f in FAMILY.values()}
_BY_THINKER_TYPE = {f.thinker_model_type: f.name for f in FAMILY.values()}
_BY_ARCHITECTURE = {f.architecture: f.name for f in FAMILY.values()} | {
    "Qwen2_5OmniForConditionalGeneration": QWEN25_OMNI,
    "Qwen2_5OmniThinkerForConditionalGeneration": QWEN25_OMNI,
    "Qwen3OmniMoeThinkerForConditionalGeneration": QWEN3_OMNI,
}


def get(name: str) -> Family:
    """The family called ``name`` (one of :data:`embedbench.cases.FAMILIES`)."""
    try:
        return FAMILY[name]
    except KeyError:
        raise ConfigError(
            f"unknown family {name!r}; choose from {', '.join((AUTO_FAMILY, *FAMILIES))}"
        ) from None


class UnknownModelType(ValueError):
    """config.json names a model_type that is no family of embedbench's."""


def family_of_config(config: dict[str, Any]) -> tuple[str, str]:
    """The family a config.json describes, and how it was told: ``("qwen3-omni",
    "model_type")``. Read from the top-level ``model_type``, else
    ``thinker_config.model_type``, else ``architectures``; a config that names none of
    them (an abridged or hand-written one) is taken as the embedded default's family
    (``"default"``). Raises :class:`UnknownModelType` for a model_type of another model.
    """
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        if model_type not in _BY_MODEL_TYPE:
            raise UnknownModelType(model_type)
        return _BY_MODEL_TYPE[model_type], "model_type"
    thinker = config.get("thinker_config")
    thinker_type = thinker.get("model_type") if isinstance(thinker, dict) else None
    if isinstance(thinker_type, str) and thinker_type in _BY_THINKER_TYPE:
        return _BY_THINKER_TYPE[thinker_type], "thinker_config.model_type"
    architectures = config.get("architectures")
    if isinstance(architectures, list):
        for architecture in architectures:
            if architecture in _BY_ARCHITECTURE:
                return _BY_ARCHITECTURE[architecture], "architectures"
    return DEFAULT_FAMILY, "default"


def requested_family(requested: str, *, has_model: bool) -> str:
    """The family a run without a checkpoint builds its synthetic one for (``auto``: the
    embedded default, Qwen2.5-Omni); with a checkpoint, ``requested`` itself."""
    if requested == AUTO_FAMILY and not has_model:
        return DEFAULT_FAMILY
    return requested


def check_family(requested: str, found: str, how: str, model_dir: str | Path) -> str:
    """The run's family: ``found`` (the checkpoint's), unless ``requested`` names another
    family, which is refused with one line (ConfigError, exit 2)."""
    if requested in (AUTO_FAMILY, found):
        return found
    get(requested)
    told = {
        "model_type": f"model_type {FAMILY[found].model_type!r}",
        "thinker_config.model_type": f"thinker_config.model_type "
        f"{FAMILY[found].thinker_model_type!r}",
        "architectures": f"architectures {FAMILY[found].architecture!r}",
        "default": "no model_type (taken as Qwen2.5-Omni)",
    }[how]
    raise ConfigError(
        f"family {requested} contradicts the checkpoint {model_dir}: its config.json has "
        f"{told}, a {FAMILY_LABELS[found]} checkpoint; pass --family auto (notebook: "
        f"family='auto') or a {FAMILY_LABELS[requested]} checkpoint"
    )
