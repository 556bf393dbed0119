"""Targets: a model shim around the embedding table plus the two named variants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

VARIANTS: tuple[str, str] = ("baseline", "fixed")

# f(input_ids, multimodal_embeddings=None, *, is_multimodal=None) -> inputs_embeds
EmbedFn = Callable[..., torch.Tensor]


@dataclass
class Target:
    """What the harness needs from a target.

    ``language_model`` exposes ``embed_input_ids(input_ids)``; text lookups are
    counted by wrapping that attribute on the instance. ``variants`` maps
    ``"baseline"`` and ``"fixed"`` to bound wrapper methods. ``tag`` marks a
    multimodal embedding tensor with its modality and returns it. ``modules`` names
    modules beyond those found from the classes and variants that the freshness check
    (:mod:`embedbench.freshness`) compares with their files; ``checkout`` is the git
    work tree the code was imported from, if any.
    """

    name: str
    model: Any
    language_model: torch.nn.Module
    variants: dict[str, EmbedFn]
    tag: Callable[[torch.Tensor, str], torch.Tensor]
    metadata: dict[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    checkout: str | None = None
