"""What a model family is: its facts and hooks, the same fields for every family.

A family is one thinker whose ``embed_input_ids`` repeated the text-embedding lookup. Its
module (one per family, beside this one) builds a :class:`Family`; the registry
(:mod:`embedbench.omni.families`) collects them. Everything here is plain data and
torch-free, so the report side can read a family's name, label and PR; what needs torch
(the replica forms, the real class's extra attributes) lives in the module that
``replica`` names, imported only on the run side (:meth:`Family.hooks`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = ["DEEPSTACK_BUFFER", "Family", "ReadBack"]

# What validation compares besides the output, for a family with DeepStack.
DEEPSTACK_BUFFER = "deepstack_buffer"

# (config as transformers reads it, checkpoint facts) -> (what it reads, what it should).
ReadBack = Callable[[Any, Any], tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class Family:
    """One thinker family: facts (names, geometry, token ids, expected lookups, PR) and
    hooks (the replica module, the real class, its config class and read-back, the
    language-model classes of the ``production`` shim)."""

    # --family and the results' "family"; its label in reports; the PR that fixed it.
    name: str
    label: str
    pr: str
    # config.json: model_type, architectures[0] and thinker_config.model_type.
    model_type: str
    architecture: str
    thinker_model_type: str
    # The thinker class whose embed_input_ids is measured, and where it lives in vllm-omni.
    thinker_class: str
    thinker_module: str
    thinker_path: str
    # The published checkpoint the synthetic one stands in for (and its short name in
    # help texts), and its text table.
    published: str
    model_label: str
    published_config_url: str
    vocab_size: int
    hidden_size: int
    # thinker_config's token ids as the published config.json spells and sets them.
    token_ids: Mapping[str, int] = field(hash=False)
    # Text lookups per call, per case and variant (baseline -> fixed).
    expected_lookups: Mapping[str, Mapping[str, int]] = field(hash=False)
    # The run-side module of the replica forms: build_target(table, facts, lm_shim, family)
    # and, optionally, prepare_real_shim(shim, module, facts, table) -> metadata.
    replica: str
    # transformers' thinker config class (module, class) and what it must read back.
    thinker_config_class: tuple[str, str]
    read_back: ReadBack = field(hash=False, compare=False)
    # vLLM's served language model of the production shim: (module, causal LM, model).
    production_language_model: tuple[str, str, str]
    # Other architectures a config.json may name for this family.
    other_architectures: tuple[str, ...] = ()
    # thinker_config.vision_config.deepstack_visual_indexes (empty: no DeepStack).
    # Vision embeddings then carry (len + 1) x hidden features.
    deepstack_visual_indexes: tuple[int, ...] = ()
    # config.json sections beside thinker_config (talker, vocoder) of a synthetic one.
    other_config: Mapping[str, Any] = field(default_factory=dict, hash=False)
    # The published before/after table of the family's PR, if one was published.
    reference_table: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    # The embedded default (no --model) and what a result without "family" measured.
    default: bool = False

    @property
    def deepstack(self) -> bool:
        return bool(self.deepstack_visual_indexes)

    @property
    def compared(self) -> tuple[str, ...]:
        """What validation compares between the two forms."""
        return ("output", DEEPSTACK_BUFFER) if self.deepstack else ("output",)

    @property
    def measured(self) -> str:
        """``Class.embed_input_ids`` of the real thinker."""
        return f"{self.thinker_class}.embed_input_ids"

    def lookups(self, case: str) -> dict[str, int]:
        """Text lookups per call of each form on ``case``."""
        return dict(self.expected_lookups[case])

    def hooks(self) -> ModuleType:
        """The family's run-side module (imports torch): see ``replica``."""
        return importlib.import_module(self.replica)

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
                # The vision merger projects to the text width (published: = hidden).
                "out_hidden_size": hidden_size,
            }
        return {
            "architectures": [self.architecture],
            "model_type": self.model_type,
            "torch_dtype": "bfloat16",
            "thinker_config": thinker,
            **{key: dict(value) for key, value in self.other_config.items()},
        }
