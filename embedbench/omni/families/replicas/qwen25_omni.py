"""Qwen2.5-Omni's replica forms: ``Qwen2_5OmniThinkerForConditionalGeneration`` reduced to
what ``embed_input_ids`` touches.

* ``ReferenceThinker.embed_input_ids_baseline``: vllm-omni 0.28.0
  ``Qwen2_5OmniThinkerForConditionalGeneration.embed_input_ids`` (two text lookups
  for multimodal input).
* ``ReferenceThinker.embed_input_ids_fixed``: vllm-omni 0.30.0, same method (one).
* ``ReferenceThinkerConfig``: the ``attribute_map`` indirection of transformers'
  ``PreTrainedConfig.__getattribute__`` that every ``config.*_token_index`` read
  pays in the real model.

The code is written afresh from those semantics, on the shared helper replicas.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from embedbench.omni.families.spec import Family
from embedbench.omni.targets import Target, lm_metadata, vllm_helpers
from embedbench.omni.targets.reference import reference_language_model
from embedbench.omni.targets.vllm_helpers import (
    MultiModalEmbeddings,
    SupportsMultiModalReplica,
    check_interleaved_audio_video,
    merge_interleaved_embeddings,
    tag_modality,
)

__all__ = ["REPLICA_OF", "ReferenceThinker", "ReferenceThinkerConfig", "build_target"]

REPLICA_OF = (
    "vllm-omni 0.28.0 (baseline) / 0.30.0 (fixed) "
    "Qwen2_5OmniThinkerForConditionalGeneration.embed_input_ids; vllm 0.30.0 helpers"
)


class ReferenceThinkerConfig:
    """The three token ids of ``Qwen2_5OmniThinkerConfig``, read through the same
    ``attribute_map`` indirection as transformers' ``PreTrainedConfig``."""

    attribute_map: ClassVar[dict[str, str]] = {
        "image_token_id": "image_token_index",
        "video_token_id": "video_token_index",
        "audio_token_id": "audio_token_index",
    }

    def __init__(
        self,
        *,
        audio_token_index: int = 151646,
        image_token_index: int = 151655,
        video_token_index: int = 151656,
    ) -> None:
        self.audio_token_index = int(audio_token_index)
        self.image_token_index = int(image_token_index)
        self.video_token_index = int(video_token_index)

    def __setattr__(self, key: str, value: Any) -> None:
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key: str) -> Any:
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __repr__(self) -> str:
        return (
            f"ReferenceThinkerConfig(audio_token_index={self.audio_token_index}, "
            f"image_token_index={self.image_token_index}, "
            f"video_token_index={self.video_token_index})"
        )


class ReferenceThinker(nn.Module, SupportsMultiModalReplica):
    """Shim of ``Qwen2_5OmniThinkerForConditionalGeneration``: just what
    ``embed_input_ids`` touches (``config``, ``_has_oov_mm_tokens``, the language
    model). Base order as in the real class (``nn.Module`` first), so the
    zero-argument ``super()`` in both methods resolves to the replica parent."""

    def __init__(self, language_model: nn.Module, config: ReferenceThinkerConfig) -> None:
        super().__init__()
        self.config = config
        self._has_oov_mm_tokens = False
        self.language_model = language_model

    def get_language_model(self) -> nn.Module:
        return self.language_model

    def embed_input_ids_baseline(
        self,
        input_ids: torch.Tensor,
        multimodal_embeddings: MultiModalEmbeddings | None = None,
        *,
        is_multimodal: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """vllm-omni 0.28.0: unconditional lookup first, a second one to merge into."""
        if multimodal_embeddings is None or is_multimodal is None:
            return super().embed_input_ids(input_ids)

        # Text lookup #1, done before knowing whether it is needed.
        inputs_embeds = self._embed_text_input_ids(
            input_ids,
            self.get_language_model().embed_input_ids,
            is_multimodal=is_multimodal,
        )

        if len(multimodal_embeddings) == 0:
            return inputs_embeds

        video_token_id = self.config.video_token_index
        audio_token_id = self.config.audio_token_index

        input_ids_cpu = input_ids.cpu()
        is_video = is_multimodal & (input_ids_cpu == video_token_id)
        is_audio = is_multimodal & (input_ids_cpu == audio_token_id)

        num_video = is_video.sum().item()
        num_audio = is_audio.sum().item()

        if check_interleaved_audio_video(is_video, is_audio, num_video, num_audio):
            # Text lookup #2 (interleaved path).
            inputs_embeds = self._embed_text_input_ids(
                input_ids,
                self.get_language_model().embed_input_ids,
                is_multimodal=is_multimodal,
            )
            return merge_interleaved_embeddings(
                inputs_embeds,
                multimodal_embeddings,
                is_video,
                is_audio,
                is_multimodal,
            )

        # Text lookup #2 happens inside the parent (standard path).
        return super().embed_input_ids(
            input_ids,
            multimodal_embeddings=multimodal_embeddings,
            is_multimodal=is_multimodal,
        )

    def embed_input_ids_fixed(
        self,
        input_ids: torch.Tensor,
        multimodal_embeddings: MultiModalEmbeddings | None = None,
        *,
        is_multimodal: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """vllm-omni 0.30.0: the CPU masks and the interleave check come first; every
        path makes exactly one text lookup."""
        if multimodal_embeddings is None or is_multimodal is None:
            return super().embed_input_ids(input_ids)

        if len(multimodal_embeddings) == 0:
            return self._embed_text_input_ids(
                input_ids,
                self.get_language_model().embed_input_ids,
                is_multimodal=is_multimodal,
            )

        video_token_id = self.config.video_token_index
        audio_token_id = self.config.audio_token_index

        input_ids_cpu = input_ids.cpu()
        is_video = is_multimodal & (input_ids_cpu == video_token_id)
        is_audio = is_multimodal & (input_ids_cpu == audio_token_id)

        num_video = is_video.sum().item()
        num_audio = is_audio.sum().item()

        if check_interleaved_audio_video(is_video, is_audio, num_video, num_audio):
            inputs_embeds = self._embed_text_input_ids(
                input_ids,
                self.get_language_model().embed_input_ids,
                is_multimodal=is_multimodal,
            )
            return merge_interleaved_embeddings(
                inputs_embeds,
                multimodal_embeddings,
                is_video,
                is_audio,
                is_multimodal,
            )

        return super().embed_input_ids(
            input_ids,
            multimodal_embeddings=multimodal_embeddings,
            is_multimodal=is_multimodal,
        )


def build_target(table: torch.Tensor, token_ids: Any, lm_shim: str, family: Family) -> Target:
    """The built-in target of ``family``: the replica shim around ``table`` (not copied),
    with ``token_ids``'s audio, image and video ids."""
    config = ReferenceThinkerConfig(
        audio_token_index=token_ids.audio_token_id,
        image_token_index=token_ids.image_token_id,
        video_token_index=token_ids.video_token_id,
    )
    language_model = reference_language_model(table, lm_shim)
    model = ReferenceThinker(language_model, config)
    return Target(
        name="reference",
        model=model,
        language_model=language_model,
        variants={
            "baseline": model.embed_input_ids_baseline,
            "fixed": model.embed_input_ids_fixed,
        },
        tag=tag_modality,
        metadata={"replica_of": REPLICA_OF, **lm_metadata(lm_shim, language_model)},
        modules=(__name__, vllm_helpers.__name__),
        family=family.name,
    )
