"""Built-in, torch-only replica of the two wrapper forms and the vLLM helpers they call.

What is replicated (and from where):

* ``ReferenceThinker.embed_input_ids_baseline``: vllm-omni 0.28.0
  ``Qwen2_5OmniThinkerForConditionalGeneration.embed_input_ids`` (two text lookups
  for multimodal input).
* ``ReferenceThinker.embed_input_ids_fixed``: vllm-omni 0.30.0, same method (one).
* ``SupportsMultiModalReplica``: vllm 0.30.0 ``SupportsMultiModal.embed_input_ids``
  and ``_embed_text_input_ids`` (``model_executor/models/interfaces.py``).
* ``check_interleaved_audio_video`` / ``merge_interleaved_embeddings``: vllm 0.30.0
  ``model_executor/models/qwen2_5_omni_thinker.py``.
* ``_merge_multimodal_embeddings`` and its helpers: vllm 0.30.0
  ``model_executor/models/utils.py``.
* ``tag_modality`` / ``_get_mm_embedding_modalities``: vllm 0.30.0
  ``multimodal/utils.py`` (``set_mm_embedding_modality`` /
  ``get_mm_embedding_modalities``).
* The language model, one of two shims (``lm_shim``):
  ``FlatLanguageModel`` (``flat``), the PR script's one-level
  ``embed_input_ids`` -> ``embed_tokens``; ``ReferenceLanguageModel``
  (``production``), the served call chain ``Qwen2ForCausalLM.embed_input_ids`` ->
  ``Qwen2Model.embed_input_ids``. Both end in ``ReferenceVocabEmbedding``:
  ``VocabParallelEmbedding.__call__`` (TP=1) -> ``UnquantizedEmbeddingMethod.embedding``
  -> ``F.embedding(ids.long(), weight)``.
* ``ReferenceThinkerConfig``: the ``attribute_map`` indirection of transformers'
  ``PreTrainedConfig.__getattribute__`` that every ``config.*_token_index`` read
  pays in the real model.

The host-side work is what is timed, so it is kept the same as in the real code:
the ``input_ids.cpu()`` copy, every ``.item()`` read, the per-position Python loop
of the interleave check, the function-local imports, boolean-index assignment in
both merges (with a dtype cast in the standard merge only), and the nesting of
calls down to ``F.embedding``. The code is written afresh from those semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from embedbench.cases import DEFAULT_FAMILY, QWEN3_OMNI
from embedbench.config import LM_SHIMS
from embedbench.omni.targets import Target, lm_metadata

REPLICA_OF = (
    "vllm-omni 0.28.0 (baseline) / 0.30.0 (fixed) "
    "Qwen2_5OmniThinkerForConditionalGeneration.embed_input_ids; vllm 0.30.0 helpers"
)

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
    from .reference import _get_mm_embedding_modalities  # local import, as in vLLM

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
        from .reference import _merge_multimodal_embeddings  # local import, as in vLLM

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


# --------------------------------------------------------------------------------------
# Config and language model
# --------------------------------------------------------------------------------------


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


class _UnquantizedEmbeddingMethod:
    """``UnquantizedEmbeddingMethod.embedding``: a plain ``F.embedding``."""

    def embedding(self, layer: nn.Module, input_: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_, layer.weight)


class ReferenceVocabEmbedding(nn.Module):
    """``VocabParallelEmbedding`` at TP=1: ``F.embedding(ids.long(), weight)``.

    The weight is the given table itself (a non-trainable ``Parameter`` sharing its
    storage), never a copy.
    """

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        if table.dim() != 2:
            raise ValueError(f"embedding table must be 2-D, got shape {tuple(table.shape)}")
        self.tp_size = 1
        self.quant_method = _UnquantizedEmbeddingMethod()
        self.num_embeddings, self.embedding_dim = (int(d) for d in table.shape)
        self.weight = nn.Parameter(table, requires_grad=False)

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        if self.tp_size == 1:
            return self.quant_method.embedding(self, input_.long())
        raise NotImplementedError("the reference replica runs at TP=1 only")

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}"


class ReferenceTextModel(nn.Module):
    """``Qwen2Model``: owns ``embed_tokens``."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.embed_tokens = ReferenceVocabEmbedding(table)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


class FlatLanguageModel(nn.Module):
    """The PR script's language model: ``embed_input_ids(ids)`` is
    ``self.embed_tokens(ids)``, one call level above the embedding module.

    Used by both targets (``lm_shim="flat"``): around ``ReferenceVocabEmbedding`` here,
    around vLLM's own ``VocabParallelEmbedding`` in the ``vllm-omni`` target.
    """

    def __init__(self, embed_tokens: nn.Module) -> None:
        super().__init__()
        self.embed_tokens = embed_tokens

    @property
    def table(self) -> torch.Tensor:
        """The embedding table (the same storage as the tensor given)."""
        return self.embed_tokens.weight

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


class ReferenceLanguageModel(nn.Module):
    """``Qwen2ForCausalLM`` reduced to its text lookup: ``embed_input_ids(input_ids)``
    through ``Qwen2Model`` (``lm_shim="production"``, the served call depth)."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.model = ReferenceTextModel(table)

    @property
    def table(self) -> torch.Tensor:
        """The embedding table (the same storage as the tensor given)."""
        return self.model.embed_tokens.weight

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_input_ids(input_ids)


# --------------------------------------------------------------------------------------
# The thinker shim and its two wrapper forms (vllm_omni qwen2_5_omni_thinker.py)
# --------------------------------------------------------------------------------------


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


def reference_language_model(table: torch.Tensor, lm_shim: str = "flat") -> nn.Module:
    """The replica language model around ``table`` (not copied) for ``lm_shim``."""
    if lm_shim == "flat":
        return FlatLanguageModel(ReferenceVocabEmbedding(table))
    if lm_shim == "production":
        return ReferenceLanguageModel(table)
    raise ValueError(f"unknown lm_shim {lm_shim!r}; choose from {', '.join(LM_SHIMS)}")


def build_reference_target(table: torch.Tensor, token_ids: Any, lm_shim: str = "flat") -> Target:
    """The built-in target: the replica shim around ``table`` (not copied).

    ``token_ids`` is any object with ``audio_token_id``, ``image_token_id`` and
    ``video_token_id`` (e.g. ``checkpoint.ThinkerFacts``); ``lm_shim`` picks the
    language model (``flat`` or ``production``, mirroring the ``vllm-omni`` target's).
    Its ``family`` (default Qwen2.5-Omni) picks the replica: a Qwen3-Omni checkpoint's
    facts give :func:`build_reference_qwen3_target`.
    """
    if getattr(token_ids, "family", DEFAULT_FAMILY) == QWEN3_OMNI:
        return build_reference_qwen3_target(table, token_ids, lm_shim)
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
        modules=(__name__,),
    )


# --------------------------------------------------------------------------------------
# Qwen3-Omni (vllm_omni qwen3_omni/qwen3_omni_moe_thinker.py)
# --------------------------------------------------------------------------------------

REPLICA_OF_QWEN3 = (
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


def build_reference_qwen3_target(
    table: torch.Tensor, token_ids: Any, lm_shim: str = "flat"
) -> Target:
    """The built-in Qwen3-Omni target: the replica shim around ``table`` (not copied)."""
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
        metadata={"replica_of": REPLICA_OF_QWEN3, **lm_metadata(lm_shim, language_model)},
        modules=(__name__,),
        family=QWEN3_OMNI,
    )
