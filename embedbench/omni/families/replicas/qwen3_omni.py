"""Qwen3-Omni's replica forms: ``Qwen3OmniMoeThinkerForConditionalGeneration`` reduced to
what ``embed_input_ids`` touches, with its DeepStack split and buffer.

* ``ReferenceQwen3Thinker.embed_input_ids_baseline`` / ``_fixed``: vllm-omni 0.28.0 /
  0.30.0 ``Qwen3OmniMoeThinkerForConditionalGeneration.embed_input_ids``, the buffer
  helpers ``_set_deepstack_input_embeds`` / ``_resize_deepstack_input_embeds`` (the same
  in both).
* ``ReferenceQwen3ThinkerConfig`` / ``ReferenceQwen3TextConfig``: transformers'
  ``PreTrainedConfig`` attribute reads (an empty ``attribute_map``).

And for the ``vllm-omni`` target, :func:`prepare_real_shim`: what the real ``__init__``
gives the wrapper besides config and language model (the vision tower's
``deepstack_visual_indexes`` and the DeepStack buffer). Written afresh, on the shared
helper replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, ClassVar

import torch
from torch import nn

from embedbench.omni.families.spec import Family
from embedbench.omni.targets import Target, bare_module, lm_metadata, vllm_helpers
from embedbench.omni.targets.reference import reference_language_model
from embedbench.omni.targets.vllm_helpers import (
    MultiModalEmbeddings,
    SupportsMultiModalReplica,
    _merge_multimodal_embeddings,
    check_interleaved_audio_video,
    merge_interleaved_embeddings,
    tag_modality,
)

__all__ = [
    "DEEPSTACK_BUFFER_ROWS",
    "REPLICA_OF",
    "ReferenceQwen3Thinker",
    "ReferenceQwen3ThinkerConfig",
    "build_target",
    "deepstack_visual_indexes",
    "prepare_real_shim",
]

REPLICA_OF = (
    "vllm-omni 0.28.0 (baseline) / 0.30.0 (fixed) "
    "Qwen3OmniMoeThinkerForConditionalGeneration.embed_input_ids with its DeepStack "
    "split and buffer (_set_deepstack_input_embeds); vllm 0.30.0 helpers"
)

# Rows of the DeepStack buffer as built (a served engine sizes it by
# max_num_batched_tokens); a longer input grows it, as the real class does.
DEEPSTACK_BUFFER_ROWS = 2048


class _Qwen3Config:
    """A transformers ``PreTrainedConfig`` attribute read: every read checks the class's
    ``attribute_map`` first (empty for the Qwen3-Omni thinker and text configs, which
    use ``*_token_id`` directly)."""

    attribute_map: ClassVar[dict[str, str]] = {}

    def __setattr__(self, key: str, value: Any) -> None:
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key: str) -> Any:
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class ReferenceQwen3TextConfig(_Qwen3Config):
    """``Qwen3OmniMoeTextConfig`` as far as the wrapper reads it: ``hidden_size``."""

    def __init__(self, *, hidden_size: int) -> None:
        self.hidden_size = int(hidden_size)

    def __repr__(self) -> str:
        return f"ReferenceQwen3TextConfig(hidden_size={self.hidden_size})"


class ReferenceQwen3ThinkerConfig(_Qwen3Config):
    """``Qwen3OmniMoeThinkerConfig`` as far as the wrapper reads it: the audio, image and
    video token ids and ``text_config.hidden_size``."""

    def __init__(
        self, *, audio_token_id: int, image_token_id: int, video_token_id: int, hidden_size: int
    ) -> None:
        self.audio_token_id = int(audio_token_id)
        self.image_token_id = int(image_token_id)
        self.video_token_id = int(video_token_id)
        self.text_config = ReferenceQwen3TextConfig(hidden_size=hidden_size)

    def __repr__(self) -> str:
        return (
            f"ReferenceQwen3ThinkerConfig(audio_token_id={self.audio_token_id}, "
            f"image_token_id={self.image_token_id}, video_token_id={self.video_token_id}, "
            f"text_config={self.text_config!r})"
        )


class ReferenceQwen3Visual(nn.Module):
    """The vision tower as far as the wrapper reads it: ``deepstack_visual_indexes`` (a
    submodule, so ``self.visual`` is looked up through ``nn.Module.__getattr__``)."""

    def __init__(self, deepstack_visual_indexes: Sequence[int] | None) -> None:
        super().__init__()
        self.deepstack_visual_indexes = (
            None if deepstack_visual_indexes is None else list(deepstack_visual_indexes)
        )


class ReferenceQwen3Thinker(nn.Module, SupportsMultiModalReplica):
    """Shim of ``Qwen3OmniMoeThinkerForConditionalGeneration``: what ``embed_input_ids``
    touches (``config``, ``visual``, the language model, the DeepStack buffer and its
    two helpers). ``nn.Module`` first, so ``super()`` reaches the replica parent."""

    def __init__(
        self,
        language_model: nn.Module,
        config: ReferenceQwen3ThinkerConfig,
        deepstack_visual_indexes: Sequence[int] | None,
        *,
        buffer_rows: int = DEEPSTACK_BUFFER_ROWS,
    ) -> None:
        super().__init__()
        self.config = config
        self._has_oov_mm_tokens = False
        self.visual = ReferenceQwen3Visual(deepstack_visual_indexes)
        self.use_deepstack = deepstack_visual_indexes is not None
        self.deepstack_num_level = len(deepstack_visual_indexes or ())
        self.language_model = language_model
        if self.use_deepstack:
            table = language_model.table
            self.deepstack_input_embeds = [
                torch.zeros(
                    buffer_rows,
                    config.text_config.hidden_size,
                    dtype=table.dtype,
                    device=table.device,
                )
                for _ in range(self.deepstack_num_level)
            ]
            self.deepstack_input_embeds_num_tokens = 0

    def get_language_model(self) -> nn.Module:
        return self.language_model

    # The buffer helpers (identical in 0.28.0 and 0.30.0).

    def _resize_deepstack_input_embeds(self, num_tokens: int) -> None:
        """Replace each level's buffer by a zeroed one of ``num_tokens`` rows."""
        self.deepstack_input_embeds = [
            torch.zeros(
                num_tokens,
                self.config.text_config.hidden_size,
                device=self.deepstack_input_embeds[0].device,
                dtype=self.deepstack_input_embeds[0].dtype,
            )
            for _ in range(self.deepstack_num_level)
        ]

    def _set_deepstack_input_embeds(self, deepstack_input_embeds: torch.Tensor) -> None:
        """Copy ``(levels, tokens, hidden)`` into the first rows of each level's buffer
        (grown first when too short) and remember how many rows are valid."""
        if not getattr(self, "deepstack_input_embeds", None):
            return
        num_tokens = deepstack_input_embeds.size(1)
        if num_tokens > self.deepstack_input_embeds[0].size(0):
            self._resize_deepstack_input_embeds(num_tokens)
        for idx in range(self.deepstack_num_level):
            self.deepstack_input_embeds[idx][:num_tokens].copy_(deepstack_input_embeds[idx])
        self.deepstack_input_embeds_num_tokens = num_tokens

    # The vision split and the DeepStack buffer (the same in 0.28.0 and 0.30.0; the two
    # forms differ in where the text lookup sits around them).

    def _split_deepstack(
        self,
        multimodal_embeddings: MultiModalEmbeddings,
        is_multimodal: torch.Tensor,
        is_video: torch.Tensor,
        is_interleaved: bool,
    ) -> tuple[list[torch.Tensor], torch.Tensor, int, int] | None:
        """Replace each vision embedding of the list by its main-scale view (tagged as the
        original); return the DeepStack parts, the vision positions, the level count and
        the per-level width, or None when no embedding is vision-wide."""
        # A vision embedding is one wider than the text: main scale + DeepStack levels.
        has_vision_embeddings = [
            embeddings.shape[-1] != self.config.text_config.hidden_size
            for embeddings in multimodal_embeddings
        ]
        if self.visual.deepstack_visual_indexes is None or not any(has_vision_embeddings):
            return None
        multiscale_len = len(self.visual.deepstack_visual_indexes)
        multimodal_embeddings_multiscale = []

        if is_interleaved:
            is_vision = is_video.clone()
        else:
            is_vision = torch.zeros_like(is_multimodal)
            mm_positions = torch.nonzero(is_multimodal, as_tuple=True)[0]
            mm_position_idx = 0

        for index, embeddings in enumerate(multimodal_embeddings):
            num_tokens = embeddings.shape[0]

            if embeddings.shape[-1] != self.config.text_config.hidden_size:
                visual_dim = embeddings.shape[-1] // (multiscale_len + 1)
                multi_dim = visual_dim * multiscale_len
                embeddings_main, embeddings_multiscale = torch.split(
                    embeddings, [visual_dim, multi_dim], dim=-1
                )
                # The split's views lose the tag; the interleaved merge needs it.
                modality = getattr(embeddings, "modality", None)
                if modality is not None:
                    tag_modality(embeddings_main, modality)
                multimodal_embeddings[index] = embeddings_main
                multimodal_embeddings_multiscale.append(embeddings_multiscale)
                if not is_interleaved:
                    current_positions = mm_positions[mm_position_idx : mm_position_idx + num_tokens]
                    is_vision[current_positions] = True
            else:
                if not is_interleaved:
                    current_positions = mm_positions[mm_position_idx : mm_position_idx + num_tokens]
                    is_vision[current_positions] = False

            if not is_interleaved:
                mm_position_idx += num_tokens
        return multimodal_embeddings_multiscale, is_vision, multiscale_len, visual_dim

    def _store_deepstack(
        self,
        inputs_embeds: torch.Tensor,
        split: tuple[list[torch.Tensor], torch.Tensor, int, int],
    ) -> None:
        """Merge the DeepStack parts into a zeroed buffer shaped after ``inputs_embeds``
        (levels, tokens, width) and store it."""
        multimodal_embeddings_multiscale, is_vision, multiscale_len, visual_dim = split
        deepstack_input_embeds = inputs_embeds.new_zeros(
            inputs_embeds.size(0), multiscale_len * inputs_embeds.size(1)
        )
        deepstack_input_embeds = _merge_multimodal_embeddings(
            inputs_embeds=deepstack_input_embeds,
            multimodal_embeddings=multimodal_embeddings_multiscale,
            is_multimodal=is_vision,
        )
        deepstack_input_embeds = (
            deepstack_input_embeds.view(inputs_embeds.shape[0], multiscale_len, visual_dim)
            .permute(1, 0, 2)
            .contiguous()
        )
        self._set_deepstack_input_embeds(deepstack_input_embeds)

    def embed_input_ids_baseline(
        self,
        input_ids: torch.Tensor,
        multimodal_embeddings: MultiModalEmbeddings | None = None,
        *,
        is_multimodal: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """vllm-omni 0.28.0: the text lookup first, always; the standard path then merges
        through the parent, which looks the text up again (the interleaved path merges
        into the first lookup). The DeepStack buffer takes the first lookup's shape."""
        # Text lookup #1, before knowing whether it is needed.
        inputs_embeds = self._embed_text_input_ids(
            input_ids,
            self.language_model.embed_input_ids,
            is_multimodal=is_multimodal,
        )

        if multimodal_embeddings is None or len(multimodal_embeddings) == 0:
            return inputs_embeds

        # The masks on the ids' device (a CPU mask is moved, without waiting).
        is_mm_device = is_multimodal.to(device=input_ids.device, non_blocking=True)
        is_video = is_mm_device & (input_ids == self.config.video_token_id)
        is_audio = is_mm_device & (input_ids == self.config.audio_token_id)
        num_video = is_video.sum().item()
        num_audio = is_audio.sum().item()
        is_interleaved = check_interleaved_audio_video(is_video, is_audio, num_video, num_audio)

        split = self._split_deepstack(
            multimodal_embeddings, is_multimodal, is_video, is_interleaved
        )
        if split is not None:
            self._store_deepstack(inputs_embeds, split)

        if is_interleaved:
            return merge_interleaved_embeddings(
                inputs_embeds,
                multimodal_embeddings,
                is_video,
                is_audio,
                is_mm_device,
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
        """vllm-omni 0.30.0: the split first, then exactly one text lookup on every path;
        the DeepStack buffer is built from the merged embeddings' size and dtype."""
        if multimodal_embeddings is None or len(multimodal_embeddings) == 0:
            return self._embed_text_input_ids(
                input_ids,
                self.language_model.embed_input_ids,
                is_multimodal=is_multimodal,
            )

        is_mm_device = is_multimodal.to(device=input_ids.device, non_blocking=True)
        is_video = is_mm_device & (input_ids == self.config.video_token_id)
        is_audio = is_mm_device & (input_ids == self.config.audio_token_id)
        num_video = is_video.sum().item()
        num_audio = is_audio.sum().item()
        is_interleaved = check_interleaved_audio_video(is_video, is_audio, num_video, num_audio)

        split = self._split_deepstack(
            multimodal_embeddings, is_multimodal, is_video, is_interleaved
        )

        if is_interleaved:
            inputs_embeds = self._embed_text_input_ids(
                input_ids,
                self.language_model.embed_input_ids,
                is_multimodal=is_multimodal,
            )
            inputs_embeds = merge_interleaved_embeddings(
                inputs_embeds,
                multimodal_embeddings,
                is_video,
                is_audio,
                is_mm_device,
            )
        else:
            # The list now holds the main-scale features; the parent's one lookup.
            inputs_embeds = super().embed_input_ids(
                input_ids,
                multimodal_embeddings=multimodal_embeddings,
                is_multimodal=is_multimodal,
            )

        if split is not None:
            self._store_deepstack(inputs_embeds, split)
        return inputs_embeds


def deepstack_visual_indexes(facts: Any) -> list[int] | None:
    """The checkpoint's ``vision_config.deepstack_visual_indexes`` (only their number
    matters to the wrapper); from ``deepstack_levels`` when the config is not at hand."""
    vision = (getattr(facts, "thinker_config", None) or {}).get("vision_config") or {}
    indexes = vision.get("deepstack_visual_indexes")
    if isinstance(indexes, list):
        return [int(i) for i in indexes]
    levels = int(getattr(facts, "deepstack_levels", 0) or 0)
    return list(range(levels)) if levels else None


def build_target(table: torch.Tensor, token_ids: Any, lm_shim: str, family: Family) -> Target:
    """The built-in target of ``family``: the replica shim around ``table`` (not copied),
    with ``token_ids``'s audio, image and video ids and DeepStack levels."""
    config = ReferenceQwen3ThinkerConfig(
        audio_token_id=token_ids.audio_token_id,
        image_token_id=token_ids.image_token_id,
        video_token_id=token_ids.video_token_id,
        hidden_size=int(table.shape[1]),
    )
    language_model = reference_language_model(table, lm_shim)
    model = ReferenceQwen3Thinker(language_model, config, deepstack_visual_indexes(token_ids))
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


def prepare_real_shim(
    shim: Any, module: ModuleType, facts: Any, table: torch.Tensor
) -> dict[str, Any]:
    """What the real Qwen3-Omni ``__init__`` gives the wrapper: ``visual`` (the module's
    vision tower class, without ``__init__``) with the checkpoint's
    ``deepstack_visual_indexes``, and the DeepStack buffer (zeroed, the table's dtype and
    device) with its level count."""
    indexes = deepstack_visual_indexes(facts)
    vision_cls = getattr(module, "Qwen3Omni_VisionTransformer", None)
    visual = bare_module(vision_cls) if isinstance(vision_cls, type) else nn.Module()
    visual.deepstack_visual_indexes = indexes
    shim.visual = visual
    shim.use_deepstack = indexes is not None
    shim.deepstack_num_level = len(indexes or ())
    shim.visual_dim = facts.hidden_size
    shim.multiscale_dim = facts.hidden_size * shim.deepstack_num_level
    if shim.use_deepstack:
        shim.deepstack_input_embeds = [
            torch.zeros(
                DEEPSTACK_BUFFER_ROWS, facts.hidden_size, dtype=table.dtype, device=table.device
            )
            for _ in range(shim.deepstack_num_level)
        ]
        shim.deepstack_input_embeds_num_tokens = 0
    return {
        "visual_class": f"{type(visual).__module__}.{type(visual).__qualname__}",
        "deepstack_visual_indexes": indexes,
        "deepstack_buffer_rows": DEEPSTACK_BUFFER_ROWS,
    }
