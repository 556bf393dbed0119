"""Targets: a model shim around the embedding table plus the two named variants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from embedbench.cases import VARIANTS as VARIANTS  # torch-free home; importable from here
from embedbench.omni import families

__all__ = [
    "VARIANTS",
    "EmbedFn",
    "Target",
    "bare_module",
    "lm_metadata",
    "lookup_chain",
    "qualified_name",
]

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
    (:mod:`embedbench.harness.freshness`) compares with their files; ``checkout`` is the git
    work tree the code was imported from, if any. ``family`` is the thinker family (a
    name in :mod:`embedbench.omni.families`; default: the registry's default): it says
    which lookups validation expects and whether the model keeps a DeepStack buffer to
    compare.
    """

    name: str
    model: Any
    language_model: torch.nn.Module
    variants: dict[str, EmbedFn]
    tag: Callable[[torch.Tensor, str], torch.Tensor]
    metadata: dict[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    checkout: str | None = None
    family: str = field(default_factory=lambda: families.default().name)


def qualified_name(obj: Any) -> str:
    """``module.QualName`` of an object's class."""
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def lookup_chain(language_model: nn.Module) -> list[nn.Module]:
    """The modules a text lookup passes through: the language model, each ``model``
    below it, and last the ``embed_tokens`` module that holds the table (the chain
    ends early at a module that has neither)."""
    chain = [language_model]
    while True:
        children = chain[-1]._modules
        if "embed_tokens" in children:
            return [*chain, children["embed_tokens"]]
        if "model" not in children:
            return chain
        chain.append(children["model"])


def lm_metadata(lm_shim: str, language_model: nn.Module) -> dict[str, str]:
    """Target metadata of the language model: ``lm_shim``, the qualified class names of
    the language model and of the embedding module, and the call chain of one lookup."""
    *levels, embedding = lookup_chain(language_model)
    calls = [f"{type(module).__name__}.embed_input_ids" for module in levels]
    return {
        "lm_shim": lm_shim,
        "language_model_class": qualified_name(language_model),
        "embedding_class": qualified_name(embedding),
        "language_model": " -> ".join([*calls, f"{type(embedding).__name__} (TP=1)"]),
    }


def bare_module(cls: type) -> Any:
    """An instance of a real ``nn.Module`` class without its ``__init__`` (which wants a
    whole ``VllmConfig``): an empty module whose attributes the caller sets."""
    instance = cls.__new__(cls)
    nn.Module.__init__(instance)
    return instance
