"""The built-in target: each family's replica forms around one of two language models.

The replicas are written afresh from the real code's semantics; the host-side work is
what is timed, so it is kept the same as in the real code (the ``input_ids.cpu()`` copy,
every ``.item()`` read, the function-local imports, the nesting of calls down to
``F.embedding``). What is where:

* The shared vLLM helpers (modality tag, the two merges, the interleave check, the
  ``SupportsMultiModal`` parent): :mod:`embedbench.omni.targets.vllm_helpers`.
* Each family's thinker shim and its two wrapper forms (``embed_input_ids`` at
  vllm-omni 0.28.0, the baseline, and 0.30.0, the fix): the module its registry entry
  names (``Family.replica``), whose ``build_target`` :func:`build_reference_target` calls.
* Here, the language model, one of two shims (``lm_shim``):
  ``FlatLanguageModel`` (``flat``), the PR script's one-level
  ``embed_input_ids`` -> ``embed_tokens``; ``ReferenceLanguageModel``
  (``production``), the served call chain ``Qwen2ForCausalLM.embed_input_ids`` ->
  ``Qwen2Model.embed_input_ids``. Both end in ``ReferenceVocabEmbedding``:
  ``VocabParallelEmbedding.__call__`` (TP=1) -> ``UnquantizedEmbeddingMethod.embedding``
  -> ``F.embedding(ids.long(), weight)``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embedbench.config import LM_SHIMS
from embedbench.omni import families
from embedbench.omni.targets import Target
from embedbench.omni.targets.vllm_helpers import (  # the shared helpers, importable from here
    SupportsMultiModalReplica,
    check_interleaved_audio_video,
    merge_interleaved_embeddings,
    tag_modality,
)
from embedbench.omni.targets.vllm_helpers import (
    _get_mm_embedding_modalities as _get_mm_embedding_modalities,
)

__all__ = [
    "FlatLanguageModel",
    "ReferenceLanguageModel",
    "ReferenceTextModel",
    "ReferenceVocabEmbedding",
    "SupportsMultiModalReplica",
    "build_reference_target",
    "check_interleaved_audio_video",
    "merge_interleaved_embeddings",
    "reference_language_model",
    "tag_modality",
]


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


def reference_language_model(table: torch.Tensor, lm_shim: str = "flat") -> nn.Module:
    """The replica language model around ``table`` (not copied) for ``lm_shim``."""
    if lm_shim == "flat":
        return FlatLanguageModel(ReferenceVocabEmbedding(table))
    if lm_shim == "production":
        return ReferenceLanguageModel(table)
    raise ValueError(f"unknown lm_shim {lm_shim!r}; choose from {', '.join(LM_SHIMS)}")


def build_reference_target(table: torch.Tensor, token_ids: Any, lm_shim: str = "flat") -> Target:
    """The built-in target: the replica shim of the family around ``table`` (not copied).

    ``token_ids`` is any object with ``audio_token_id``, ``image_token_id`` and
    ``video_token_id`` (e.g. ``checkpoint.ThinkerFacts``); its ``family`` (default: the
    registry's default) picks the replica. ``lm_shim`` picks the language model (``flat``
    or ``production``, mirroring the ``vllm-omni`` target's).
    """
    family = families.get(getattr(token_ids, "family", None) or families.default().name)
    target = family.hooks().build_target(table, token_ids, lm_shim, family)
    target.modules = (*target.modules, __name__)
    return target
