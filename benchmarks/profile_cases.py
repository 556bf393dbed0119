"""Where the time goes: one call of each variant of the reference target, per case.

Each component is timed inside the real call by wrapping it with two
``perf_counter_ns`` reads (restored afterwards):

- ``lookup``: the language model's ``embed_input_ids`` (``F.embedding`` of the whole
  ``input_ids``; the count says how many per call);
- ``.cpu()``: ``input_ids.cpu()`` (``torch.Tensor.cpu`` patched; a no-op returning the
  tensor itself on the CPU, a device-to-host copy and sync on a GPU);
- ``interleave check``: ``check_interleaved_audio_video`` (Python loop with ``.item()``);
- ``merge``: ``_merge_multimodal_embeddings`` (standard path) or
  ``merge_interleaved_embeddings`` (interleaved path);
- ``remainder``: the rest of the call — the mask expressions and their ``.sum().item()``
  counts, config reads, Python call overhead, and the instrumentation's own reads
  (about 0.1–0.3 µs per wrapped call).

Per (case, variant): warm-up, then N calls; each column is the median over calls (the
remainder is computed per call, then its median), so columns need not add up exactly.
"uninstrumented" is the median host latency of the same call through
``embedbench.harness.timing.time_calls`` without any wrapper. All pinned to one core, one torch
thread, gc off, inference mode (``embedbench.harness.isolation.isolated``). A second table
replays the mask-and-count lines of the wrapper standalone on the same inputs, to show
what the remainder holds.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import _common as C
import torch

from embedbench.harness.isolation import isolated
from embedbench.harness.timing import time_calls
from embedbench.omni.scenarios import CASES, build_scenario, call_variant
from embedbench.omni.targets import vllm_helpers

COMPONENTS = ("lookup", ".cpu()", "interleave check", "merge")


class Profiler:
    """Wraps the components with timers; ``acc``/``count`` hold the current call's totals."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.acc: dict[str, int] = dict.fromkeys(COMPONENTS, 0)
        self.count: dict[str, int] = dict.fromkeys(COMPONENTS, 0)
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def reset(self) -> None:
        for k in COMPONENTS:
            self.acc[k] = 0
            self.count[k] = 0

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        perf = time.perf_counter_ns
        acc, count = self.acc, self.count

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = perf()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[name] += perf() - t0
                count[name] += 1

        return timed

    def _patch(self, owner: Any, attr: str, name: str, *, instance: bool = False) -> None:
        original = getattr(owner, attr)
        self._saved.append((owner, attr, original, instance))
        setattr(owner, attr, self._wrap(name, original))

    def __enter__(self) -> Profiler:
        self._patch(self.target.language_model, "embed_input_ids", "lookup", instance=True)
        self._patch(torch.Tensor, "cpu", ".cpu()")
        # The replica's module calls the interleave helpers by its own names; the parent
        # imports the standard merge from the helpers' module at each call.
        replica = sys.modules[type(self.target.model).__module__]
        self._patch(replica, "check_interleaved_audio_video", "interleave check")
        self._patch(vllm_helpers, "_merge_multimodal_embeddings", "merge")
        self._patch(replica, "merge_interleaved_embeddings", "merge")
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original, instance in reversed(self._saved):
            if instance:
                delattr(owner, attr)  # back to the class's bound method
            else:
                setattr(owner, attr, original)
        self._saved.clear()


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _mask_replay(scenario: Any, config: Any) -> Callable[[], Any]:
    """The wrapper's mask-and-count lines, standalone."""
    input_ids, is_multimodal = scenario.input_ids, scenario.is_multimodal

    def replay() -> tuple[int, int]:
        video_token_id = config.video_token_index
        audio_token_id = config.audio_token_index
        input_ids_cpu = input_ids.cpu()
        is_video = is_multimodal & (input_ids_cpu == video_token_id)
        is_audio = is_multimodal & (input_ids_cpu == audio_token_id)
        return is_video.sum().item(), is_audio.sum().item()

    return replay


def profile_one(
    target: Any, scenario: Any, variant: str, warmup: int, calls: int
) -> dict[str, Any]:
    """Median µs per component of one variant on one scenario."""
    fn = target.variants[variant]
    time_calls(lambda: call_variant(fn, scenario), warmup)
    f0 = _minflt()
    plain = time_calls(lambda: call_variant(fn, scenario), calls)
    faults = (_minflt() - f0) / calls
    uninstrumented = C.median([s[0] for s in plain])
    per_call: list[dict[str, float]] = []
    counts: dict[str, int] = {}
    with Profiler(target) as prof:
        for i in range(warmup + calls):
            prof.reset()
            t0 = time.perf_counter_ns()
            call_variant(fn, scenario)
            total = time.perf_counter_ns() - t0
            if i < warmup:
                continue
            row = {k: prof.acc[k] / 1e3 for k in COMPONENTS}
            row["total"] = total / 1e3
            row["remainder"] = row["total"] - sum(row[k] for k in COMPONENTS)
            per_call.append(row)
            counts = dict(prof.count)
    out = {k: C.median([r[k] for r in per_call]) for k in (*COMPONENTS, "total", "remainder")}
    out["uninstrumented"] = uninstrumented
    out["minflt_per_call"] = faults
    out["counts"] = counts
    return out


@dataclass
class Measured:
    """Per case and variant, the profile; per multimodal case, the mask lines replayed."""

    cases: list[str]
    tokens: int
    hidden: int
    calls: int
    warmup: int
    core: int
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    replays: dict[str, float] = field(default_factory=dict)


def measure(args: argparse.Namespace, core: int) -> Measured:
    """Profile each case's two variants on ``core``, and replay its mask lines alone."""
    calls, warmup = (20, 5) if args.quick else (args.calls, 20)
    data = Measured(args.cases, args.tokens, args.hidden, calls, warmup, core)
    target, facts = C.reference_setup(args.hidden)
    with isolated(core):
        for case in args.cases:
            scenario = build_scenario(
                case,
                args.tokens,
                token_ids=facts,
                hidden_size=facts.hidden_size,
                device="cpu",
                tag=target.tag,
            )
            for variant in ("baseline", "fixed"):
                data.results[f"{case}/{variant}"] = profile_one(
                    target, scenario, variant, warmup, calls
                )
            if scenario.is_multimodal is not None:
                replay = _mask_replay(scenario, target.model.config)
                samples = time_calls(replay, warmup + calls)[warmup:]
                data.replays[case] = C.median([s[0] for s in samples])
    return data


def _profile_table(data: Measured) -> str:
    rows = []
    for case in data.cases:
        for variant in ("baseline", "fixed"):
            r = data.results[f"{case}/{variant}"]
            n = r["counts"]
            rows.append(
                [
                    case,
                    variant,
                    f"{r['uninstrumented']:.1f}",
                    f"{r['minflt_per_call']:.0f}",
                    f"{r['total']:.1f}",
                    f"{r['lookup']:.1f} ({n.get('lookup', 0)}×)",
                    f"{r['.cpu()']:.2f}" if n.get(".cpu()") else "–",
                    f"{r['interleave check']:.1f}" if n.get("interleave check") else "–",
                    f"{r['merge']:.1f}" if n.get("merge") else "–",
                    f"{r['remainder']:.1f}",
                ]
            )
    headers = [
        *("case", "variant", "uninstrumented (µs)", "page faults / call", "instrumented (µs)"),
        *("lookup (calls)", ".cpu()", "interleave check", "merge", "remainder"),
    ]
    return C.markdown_table(headers, rows, align="llrrrrrrrr")


def _saving_table(data: Measured) -> str:
    rows = []
    for case in data.cases:
        b, f = data.results[f"{case}/baseline"], data.results[f"{case}/fixed"]
        saved = b["uninstrumented"] - f["uninstrumented"]
        rows.append(
            [
                case,
                f"{saved:.1f}",
                f"{b['lookup'] - f['lookup']:.1f}",
                f"{b['total'] - f['total'] - (b['lookup'] - f['lookup']):.1f}",
                f"{100 * saved / b['uninstrumented']:.1f}",
            ]
        )
    headers = [
        *("case", "saved by the fix (µs, uninstrumented)", "of it: lookup time (µs)"),
        *("other components (µs, instrumented)", "reduction %"),
    ]
    return C.markdown_table(headers, rows)


def tabulate(data: Measured) -> list[C.Section]:
    """The per-call profile, what the fix saves, and the mask lines replayed alone."""
    malloc_env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    note = (
        "Page faults / call: minor faults (getrusage) over the uninstrumented calls; a "
        "lookup writes its output into fresh memory, so when glibc returns freed blocks to "
        "the kernel (heap trim, or mmap for blocks above its threshold) every call pays "
        "~2 k faults per 8.4 MB output. glibc malloc environment: "
        f"{malloc_env or 'defaults (no MALLOC_* variables)'}. "
        f"{data.tokens} tokens, table 152064 × {data.hidden} bf16 (one lookup copies "
        f"{data.tokens * data.hidden * 2 / 1e6:.1f} MB), {data.calls} profiled calls after "
        f"{data.warmup} warm-up calls per case and variant, core {data.core}. µs, medians."
    )
    replay = C.markdown_table(
        ["case", "mask + counts, replayed standalone (µs)"],
        [[case, f"{v:.1f}"] for case, v in data.replays.items()],
    )
    return [
        C.Section("Per-call profile of the reference target", _profile_table(data), note),
        C.Section("What the fix saves, per case", _saving_table(data)),
        C.Section("What the remainder holds: the mask lines alone", replay),
    ]


def main() -> None:
    p = C.parser(__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=1172)
    p.add_argument("--hidden", type=int, default=C.HIDDEN_7B, help="3584: the cached 7B table")
    p.add_argument("--calls", type=int, default=200, help="profiled calls per case and variant")
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    args = p.parse_args()
    session = C.Session("profile_cases", args)
    data = measure(args, session.core)
    fields = {"tokens": data.tokens, "hidden": data.hidden, "results": data.results}
    C.publish(session, tabulate(data), {**fields, "mask_replay_us": data.replays})


if __name__ == "__main__":
    main()
