"""Replicas of the vLLM helpers that every family's wrapper forms call, written afresh.

* ``tag_modality`` / ``_get_mm_embedding_modalities``: vllm 0.30.0
  ``multimodal/utils.py`` (``set_mm_embedding_modality`` /
  ``get_mm_embedding_modalities``).
* ``_merge_multimodal_embeddings`` and its helpers: vllm 0.30.0
  ``model_executor/models/utils.py``.
* ``check_interleaved_audio_video`` / ``merge_interleaved_embeddings``: vllm 0.30.0
  ``model_executor/models/qwen2_5_omni_thinker.py`` (every family's thinker imports
  them from there).
* ``SupportsMultiModalReplica``: vllm 0.30.0 ``SupportsMultiModal.embed_input_ids``
  and ``_embed_text_input_ids`` (``model_executor/models/interfaces.py``).

The host-side work is kept as in the real code: every ``.item()`` read, the
per-position Python loop of the interleave check, the function-local imports, and
boolean-index assignment in both merges (with a dtype cast in the standard merge only).
The family replicas (:mod:`embedbench.omni.families.replicas`) build on these; the
language models both shims end in are in :mod:`embedbench.omni.targets.reference`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = [
    "MultiModalEmbeddings",
    "SupportsMultiModalReplica",
    "check_interleaved_audio_video",
    "merge_interleaved_embeddings",
    "tag_modality",
]

MultiModalEmbeddings = Sequence[torch.Tensor]


# --------------------------------------------------------------------------------------
# Modality tag (vllm/multimodal/utils.py)
# --------------------------------------------------------------------------------------


def tag_modality(embed: torch.Tensor, modality: str) -> torch.Tensor:
    """Attach the modality as a plain ``modality`` attribute, in place; return the tensor.

    Like vLLM's ``set_mm_embedding_modality``: views and copies of the tensor do not
    carry the attribute.
    """
    embed.modality = modality  # type: ignore[attr-defined]
    return embed


def _get_mm_embedding_modalities(multimodal_embeddings: Sequence[torch.Tensor]) -> list[str]:
    """Read the tags back (``getattr(t, "modality", None)``); a missing tag is an error."""
    modalities: list[str] = []
    for index, embedding in enumerate(multimodal_embeddings):
        modality = getattr(embedding, "modality", None)
        if modality is None:
            raise ValueError(
                f"Missing modality on multimodal embedding at index {index}. "
                "Encoder gather must set embed.modality before interleaved "
                "audio-in-video merge."
            )
        modalities.append(modality)
    return modalities


# --------------------------------------------------------------------------------------
# Standard merge (vllm/model_executor/models/utils.py)
# --------------------------------------------------------------------------------------


def _flatten_embeddings(embeddings: Any) -> torch.Tensor:
    """Flatten (nested) embeddings to 2-D and concatenate them."""
    if isinstance(embeddings, torch.Tensor):
        return embeddings.flatten(0, -2)
    return torch.cat(tuple(_flatten_embeddings(item) for item in embeddings))


def _embedding_count_expression(embeddings: Any) -> str:
    """``"100 + 16"``-style description of the row counts, for error messages."""
    if isinstance(embeddings, torch.Tensor):
        return " x ".join(str(dim) for dim in embeddings.shape[:-1])
    return " + ".join(_embedding_count_expression(item) for item in embeddings)


def _require_is_multimodal(is_multimodal: torch.Tensor | None) -> torch.Tensor:
    if is_multimodal is None:
        raise ValueError("`embed_input_ids` requires the `is_multimodal` mask")
    return is_multimodal


def _merge_multimodal_embeddings(
    inputs_embeds: torch.Tensor,
    multimodal_embeddings: Any,
    is_multimodal: torch.Tensor,
) -> torch.Tensor:
    """Write all rows, in order, to the mask positions of ``inputs_embeds`` (in place).

    Boolean-index assignment of the concatenated rows cast to the text dtype; the
    row count is only checked when the assignment fails (as in vLLM).
    """
    if len(multimodal_embeddings) == 0:
        return inputs_embeds

    flat = _flatten_embeddings(multimodal_embeddings)
    input_dtype = inputs_embeds.dtype
    try:
        # A CPU mask avoids a device-to-host sync here.
        inputs_embeds[is_multimodal] = flat.to(dtype=input_dtype)
    except RuntimeError as error:
        num_actual = len(flat)
        num_expected = is_multimodal.sum().item()
        if num_actual != num_expected:
            expression = _embedding_count_expression(multimodal_embeddings)
            raise ValueError(
                f"Attempted to assign {expression} = {num_actual} "
                f"multimodal tokens to {num_expected} placeholders"
            ) from error
        raise ValueError("Error during index put operation") from error
    return inputs_embeds


# --------------------------------------------------------------------------------------
# Audio-in-video helpers (vllm/model_executor/models/qwen2_5_omni_thinker.py)
# --------------------------------------------------------------------------------------


def check_interleaved_audio_video(
    is_video: torch.Tensor,
    is_audio: torch.Tensor,
    num_video: int,
    num_audio: int,
) -> bool:
    """True when some contiguous span of video/audio positions interleaves the two.

    Walks the video-or-audio positions in a Python loop, reading neighbours with
    ``.item()``, and splits them into contiguous spans; a span is interleaved when it
    holds both modalities, its first video offset precedes its last audio offset and
    its first audio offset precedes its last video offset.
    """
    if num_video == 0 or num_audio == 0:
        return False

    positions = (is_video | is_audio).nonzero(as_tuple=True)[0]
    if len(positions) == 0:
        return False

    span_start = 0
    for span_end in range(1, len(positions) + 1):
        is_last = span_end == len(positions)
        if not is_last and positions[span_end].item() == positions[span_end - 1].item() + 1:
            continue

        span = positions[span_start:span_end]
        span_video = is_video[span]
        span_audio = is_audio[span]
        if span_video.any() and span_audio.any():
            video_offsets = span_video.nonzero(as_tuple=True)[0]
            audio_offsets = span_audio.nonzero(as_tuple=True)[0]
            if (
                video_offsets[0].item() < audio_offsets[-1].item()
                and audio_offsets[0].item() < video_offsets[-1].item()
            ):
                return True

        span_start = span_end

    return False


def merge_interleaved_embeddings(
    inputs_embeds: torch.Tensor,
    multimodal_embeddings: MultiModalEmbeddings,
    is_video: torch.Tensor,
    is_audio: torch.Tensor,
    is_multimodal: torch.Tensor,
) -> torch.Tensor:
    """Write video rows to video positions, audio rows to audio positions, the rest
    (images) to the remaining multimodal positions; grouped by the ``modality`` tag.

    Each group's row count is checked against its mask (``.item()``) first, then the
    concatenated rows are assigned by boolean index. No dtype cast (unlike the
    standard merge): the text table and the rows must share a dtype.
    """
    from .vllm_helpers import _get_mm_embedding_modalities  # local import, as in vLLM

    def _merge_group(mask: torch.Tensor, embeddings: Sequence[torch.Tensor], modality: str):
        num_expected = mask.sum().item()
        num_actual = sum(embedding.shape[0] for embedding in embeddings)
        if num_actual != num_expected:
            raise ValueError(
                f"Attempted to assign {num_actual} {modality} tokens to {num_expected} placeholders"
            )
        if embeddings:
            inputs_embeds[mask] = torch.cat(list(embeddings), dim=0)

    is_image = is_multimodal & ~is_video & ~is_audio

    modalities = _get_mm_embedding_modalities(multimodal_embeddings)
    # Plain zip (no strict=), as in vLLM.
    video = [e for e, m in zip(multimodal_embeddings, modalities) if m == "video"]  # noqa: B905
    audio = [e for e, m in zip(multimodal_embeddings, modalities) if m == "audio"]  # noqa: B905
    image = [e for e, m in zip(multimodal_embeddings, modalities) if m == "image"]  # noqa: B905

    _merge_group(is_video, video, "video")
    _merge_group(is_audio, audio, "audio")
    _merge_group(is_image, image, "image")

    return inputs_embeds


# --------------------------------------------------------------------------------------
# Parent class (vllm/model_executor/models/interfaces.py: SupportsMultiModal)
# --------------------------------------------------------------------------------------


class SupportsMultiModalReplica:
    """The parent the wrapper's zero-argument ``super()`` reaches."""

    _has_oov_mm_tokens: bool = False

    def get_language_model(self) -> Any:  # pragma: no cover - overridden by the shim
        raise NotImplementedError

    def _embed_text_input_ids(
        self,
        input_ids: torch.Tensor,
        embed_input_ids: Callable[[torch.Tensor], torch.Tensor],
        *,
        is_multimodal: torch.Tensor | None,
    ) -> torch.Tensor:
        """One text lookup; placeholders are zeroed first only for out-of-vocab ids."""
        if is_multimodal is not None and self._has_oov_mm_tokens:
            in_vocab_ids = input_ids.masked_fill(
                is_multimodal.to(device=input_ids.device, non_blocking=True), 0
            )
            return embed_input_ids(in_vocab_ids)

        return embed_input_ids(input_ids)

    def embed_input_ids(
        self,
        input_ids: torch.Tensor,
        multimodal_embeddings: MultiModalEmbeddings | None = None,
        *,
        is_multimodal: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One text lookup, then (if any rows) the standard in-place merge."""
        from .vllm_helpers import _merge_multimodal_embeddings  # local import, as in vLLM

        inputs_embeds = self._embed_text_input_ids(
            input_ids,
            self.get_language_model().embed_input_ids,
            is_multimodal=is_multimodal,
        )

        if multimodal_embeddings is None or len(multimodal_embeddings) == 0:
            return inputs_embeds

        return _merge_multimodal_embeddings(
            inputs_embeds=inputs_embeds,
            multimodal_embeddings=multimodal_embeddings,
            is_multimodal=_require_is_multimodal(is_multimodal),
        )
