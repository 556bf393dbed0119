"""Replica check: the built-in reference target against the real vLLM-Omni classes.

Run with the python of the vLLM-Omni CPU venv (``scripts/vllm-omni-cpu-env.sh``)::

    python tests/support/replica_check.py --repo REPO --baseline-ref SHA --model CKPT \\
        --lengths 300 1172 --lm-shim flat production

For every case (the six of docs/method.md, an empty embedding list, and two cases with one
embedding row too few, where both must raise the same error) and length, and for each
variant, both targets are called on identical inputs around the same table while
their text lookups are counted. Both targets use the language-model shim
``--lm-shim`` names (each shim named there in turn, in one process: vLLM's import is
most of the check's time); one lookup through each must enter the same Python functions
(method names; the classes differ), so the replica has the real call depth. The real
path is also checked with counting hooks on vLLM's own ``Qwen2ForCausalLM``,
``Qwen2Model`` and ``VocabParallelEmbedding`` methods, during one call of each
variant on the audio case. Prints one JSON object per shim, one per line: per row the
lookup counts of both targets, whether the outputs are ``torch.equal`` with the same
dtype and shape, and ``ok``; each target's counted work of one more call (the ledger
work.json records: operators, bytes, syncs) and ``ledger_same``; the two call
sequences; the hook counts. Exit code 0 when
all agree, else 1.

The checkpoint's family picks the classes: for Qwen3-Omni the real
``Qwen3OmniMoeThinkerForConditionalGeneration`` against the replica, and besides the
output, the DeepStack buffer each call stores (``_set_deepstack_input_embeds``) must be
``torch.equal`` too (``deepstack_equal`` per row), with the vision embeddings carrying
the DeepStack width.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import torch
from calltrace import method_names, python_calls

from embedbench.config import LM_SHIMS, WORKTREE
from embedbench.harness.ledger import COUNTED, count_work
from embedbench.omni import checkpoint
from embedbench.omni.families.qwen3_omni import NAME as QWEN3_OMNI
from embedbench.omni.scenarios import CASES, Scenario, build_scenario, call_variant
from embedbench.omni.targets import VARIANTS, Target, lookup_chain
from embedbench.omni.targets.reference import build_reference_target
from embedbench.omni.targets.vllm_omni import build_vllm_omni_target
from embedbench.omni.validation import count_lookups, take_deepstack_buffer

EMPTY = "empty-list"
# A case whose first embedding tensor lacks its last row: both targets must raise alike.
SHORT = "-one-row-short"
EXTRA_CASES = (EMPTY, "audio" + SHORT, "interleaved" + SHORT)


def _scenario(case: str, tokens: int, facts: Any, hidden: int, target: Target) -> Scenario:
    """A case of docs/method.md; the empty embedding list (a zero mask, no rows); or a case
    with one row too few."""
    levels = facts.deepstack_levels
    if case == EMPTY:
        text = build_scenario(
            "text",
            tokens,
            token_ids=facts,
            hidden_size=hidden,
            tag=target.tag,
            deepstack_levels=levels,
        )
        text.case = EMPTY
        text.is_multimodal = torch.zeros(tokens, dtype=torch.bool)
        text.multimodal_embeddings = []
        return text
    base = case.removesuffix(SHORT)
    scenario = build_scenario(
        base, tokens, token_ids=facts, hidden_size=hidden, tag=target.tag, deepstack_levels=levels
    )
    if case.endswith(SHORT):
        assert scenario.multimodal_embeddings
        first = scenario.multimodal_embeddings[0]
        modality = getattr(first, "modality", None)
        scenario.multimodal_embeddings[0] = target.tag(first[:-1].clone(), modality)
        scenario.case = case
    return scenario


def _call(
    target: Target, variant: str, scenario: Scenario
) -> tuple[torch.Tensor | str, int, torch.Tensor | None]:
    """The output (or the error), the lookups, and the DeepStack buffer the call stored
    (None: none stored, or a family without DeepStack)."""
    take_deepstack_buffer(target.model)  # start from an empty buffer
    with torch.inference_mode(), count_lookups(target.language_model) as counter:
        try:
            out: torch.Tensor | str = call_variant(target.variants[variant], scenario)
        except Exception as exc:  # recorded: the two targets must fail alike too
            out = f"{type(exc).__name__}: {exc}"
    return out, counter.count, take_deepstack_buffer(target.model)


def _ledger(target: Target, variant: str, scenario: Scenario) -> dict[str, Any] | None:
    """The counted work of one call (``harness.ledger``: what work.json records), its
    operators' bytes too; None where the call raises."""
    take_deepstack_buffer(target.model)
    try:
        with torch.inference_mode():
            ledger = count_work(lambda: call_variant(target.variants[variant], scenario))
    except Exception:  # the error rows: compared by their messages above
        return None
    finally:
        take_deepstack_buffer(target.model)
    row = ledger.to_json()
    return {key: row[key] for key in (*COUNTED, "op_bytes")}


def _same_buffer(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return _same(a, b)


def _same(a: torch.Tensor | str, b: torch.Tensor | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))


# vLLM methods a real lookup must pass through (counted by class-level hooks), per family.
EMBEDDING_HOOK = {
    "vllm.model_executor.layers.vocab_parallel_embedding": ("VocabParallelEmbedding",)
}
HOOKED = {
    "vllm.model_executor.models.qwen2": ("Qwen2ForCausalLM", "Qwen2Model"),
    **EMBEDDING_HOOK,
}
HOOKED_QWEN3 = {
    "vllm.model_executor.models.qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeModel"),
    **EMBEDDING_HOOK,
}


def _counting(original: Any, key: str, counts: Counter[str]) -> Any:
    def hook(*args: Any, **kwargs: Any) -> Any:
        counts[key] += 1
        return original(*args, **kwargs)

    return hook


@contextmanager
def counting_hooks(family: str | None = None) -> Iterator[Counter[str]]:
    """Count calls of the real classes' ``embed_input_ids`` / ``forward`` (class level)."""
    counts: Counter[str] = Counter()
    hooked = HOOKED_QWEN3 if family == QWEN3_OMNI else HOOKED
    with ExitStack() as stack:
        for module_name, class_names in hooked.items():
            for class_name in class_names:
                cls = getattr(importlib.import_module(module_name), class_name)
                method = "forward" if class_name == "VocabParallelEmbedding" else "embed_input_ids"
                hook = _counting(getattr(cls, method), f"{class_name}.{method}", counts)
                stack.enter_context(mock.patch.object(cls, method, hook))
        yield counts


def real_path(real: Target, facts: Any, hidden: int) -> dict[str, Any]:
    """Hook counts per variant for one audio call, with the lookups counted alike."""
    scenario = build_scenario(
        "audio",
        300,
        token_ids=facts,
        hidden_size=hidden,
        tag=real.tag,
        deepstack_levels=facts.deepstack_levels,
    )
    out = {}
    for variant in VARIANTS:
        hooks, lookups = counting_hooks(facts.family), count_lookups(real.language_model)
        with torch.inference_mode(), hooks as counts, lookups as counter:
            call_variant(real.variants[variant], scenario)
        out[variant] = {"lookups": counter.count, "hooks": dict(counts)}
    return out


def call_depth(real: Target, replica: Target) -> dict[str, Any]:
    """The Python functions one lookup enters through each target's language model."""
    ids = torch.tensor([0, 5, 7], dtype=torch.int32)
    calls: dict[str, Any] = {}
    with torch.inference_mode():
        for target in (real, replica):
            calls[target.name] = python_calls(target.language_model.embed_input_ids, ids)
    calls["same"] = method_names(calls[real.name]) == method_names(calls[replica.name])
    return calls


def compare(args: argparse.Namespace, lm_shim: str) -> dict[str, Any]:
    """Every (case, length, variant) on both targets with ``lm_shim``; the rows and an
    overall ``ok``."""
    facts = checkpoint.read_thinker_facts(args.model)
    location = checkpoint.locate_embedding(args.model, facts)
    table = checkpoint.load_embedding_table(location)
    hidden = location.shape[1]
    real = build_vllm_omni_target(
        table,
        facts,
        repo=args.repo,
        baseline_ref=args.baseline_ref,
        candidate_ref=args.candidate_ref,
        lm_shim=lm_shim,
    )
    replica = build_reference_target(table, facts, lm_shim)
    rows = []
    for tokens in args.lengths:
        for case in (*CASES, *EXTRA_CASES):
            inputs = {t.name: _scenario(case, tokens, facts, hidden, t) for t in (real, replica)}
            for variant in VARIANTS:
                real_out, real_calls, real_buffer = _call(real, variant, inputs[real.name])
                ref_out, ref_calls, ref_buffer = _call(replica, variant, inputs[replica.name])
                equal = _same(real_out, ref_out)
                deepstack_equal = _same_buffer(real_buffer, ref_buffer)
                ledgers = {
                    "vllm-omni": _ledger(real, variant, inputs[real.name]),
                    "reference": _ledger(replica, variant, inputs[replica.name]),
                }
                rows.append(
                    {
                        "case": case,
                        "tokens": tokens,
                        "variant": variant,
                        "calls": {"vllm-omni": real_calls, "reference": ref_calls},
                        "equal": equal,
                        "deepstack_equal": deepstack_equal,
                        "deepstack_stored": real_buffer is not None,
                        "errors": [o for o in (real_out, ref_out) if isinstance(o, str)],
                        "ok": equal and deepstack_equal and real_calls == ref_calls,
                        "ledgers": ledgers,
                        "ledger_same": ledgers["vllm-omni"] == ledgers["reference"],
                    }
                )
    depth = call_depth(real, replica)
    shares = lookup_chain(real.language_model)[-1].weight.data_ptr() == table.data_ptr()
    keys = ("thinker_file", "refs", "versions", "lm_shim", "language_model_class")
    return {
        "family": facts.family,
        "ok": all(row["ok"] for row in rows) and depth["same"] and shares,
        "rows": rows,
        "call_depth": depth,
        "real_path": real_path(real, facts, hidden),
        "table_shared": shares,
        "real": {k: real.metadata[k] for k in (*keys, "embedding_class", "language_model")},
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, compare, print a JSON report per shim; 0 when all rows agree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--baseline-ref", required=True)
    parser.add_argument("--candidate-ref", default=WORKTREE)
    parser.add_argument("--model", required=True)
    parser.add_argument("--lengths", nargs="+", type=int, default=[300, 1172])
    parser.add_argument("--lm-shim", nargs="+", choices=LM_SHIMS, default=["flat"])
    args = parser.parse_args(argv)
    reports = [compare(args, shim) for shim in args.lm_shim]
    for report in reports:
        print(json.dumps(report), flush=True)
    return 0 if all(report["ok"] for report in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
