"""Shared test helpers (pytest puts this directory on sys.path): quick CLI arguments,
git in a throw-away repository, the real token ids and a small seeded table, and a
seeded clock for the timing window."""

from __future__ import annotations

import importlib
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import torch

from embedbench.omni.families import qwen25_omni

# A short design for runs whose structure, not numbers, is under test (three worker
# processes of two blocks each, as the default design spreads its blocks). --allow-busy:
# such tests must not depend on a quiet machine; the contention guard has its own tests.
QUICK_DESIGN = [
    *("--lengths", "300", "--warmup", "2", "--blocks", "6", "--iterations", "3"),
    *("--processes", "3"),
]
QUICK = [*QUICK_DESIGN, "--allow-busy"]

# The kit's own benchmark scripts (benchmarks/), importable one at a time by bench_module.
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

AUDIO = qwen25_omni.FAMILY.token_ids["audio_token_index"]
IMAGE = qwen25_omni.FAMILY.token_ids["image_token_index"]
VIDEO = qwen25_omni.FAMILY.token_ids["video_token_index"]
VOCAB = qwen25_omni.FAMILY.vocab_size
TOKEN_IDS = SimpleNamespace(audio_token_id=AUDIO, image_token_id=IMAGE, video_token_id=VIDEO)


def seeded_table(hidden: int, seed: int = 0) -> torch.Tensor:
    """A (vocab, hidden) bf16 table with seeded normal values."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(VOCAB, hidden, generator=generator).to(torch.bfloat16)


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity and no signing; return its stdout."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "embedbench",
        "GIT_AUTHOR_EMAIL": "embedbench@example.invalid",
        "GIT_COMMITTER_NAME": "embedbench",
        "GIT_COMMITTER_EMAIL": "embedbench@example.invalid",
    }
    proc = subprocess.run(
        ["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return proc.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    """Stage everything, commit, return the new SHA."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# The original script's output, field by field, as its source writes it:
# benchmarks/qwen2_5_omni/benchmark_embeddings.py in github.com/vraiti/vllm-omni (the PR
# author's fork; vllm-project/vllm-omni#7477), commit 6a28291fa72845c346b9d91e6c6f4f20d86b2310.
# metadata.json, in its order (end_time is added when the run finishes):
ORIGINAL_METADATA_KEYS = (
    "baseline_ref",
    "checkout",
    "torch",
    "vllm",
    "transformers",
    "gpu",
    "cpu_core",
    "torch_cpu_threads",
    "warmup",
    "blocks",
    "iterations",
    "lengths",
    "embedding_shape",
    "dtype",
    "input_ids_dtype",
    "mask_device",
    "start_time",
    "metric_order",
    "end_time",
)
# One micro-raw.json record (timer floor: case "timer", tokens 0, scope "overhead",
# variant "timer_floor"; the comparison: scope "whole_wrapper").
ORIGINAL_RECORD_KEYS = (
    "device",
    "case",
    "tokens",
    "scope",
    "variant",
    "block",
    "iterations",
    "samples_us",
    "wall_start",
    "wall_end",
    "cpu_mhz_start",
    "cpu_mhz_end",
)
# One validation.json row (written only when both checks pass: a failure is an assert).
ORIGINAL_VALIDATION_KEYS = ("case", "tokens", "device", "calls", "same_input_wrapper_torch_equal")
# One summary.json row.
ORIGINAL_SUMMARY_KEYS = ("tokens", "case", "host_us", "reduction_pct")


def original_metadata(design: dict, metric_order: list) -> dict:
    """metadata.json as the PR's original script writes it (an H100 run), for ``design``
    (warmup, blocks, iterations, lengths)."""
    return {
        "baseline_ref": "01a2f93256975c7ff9565c5414b0fe0225bc4765",
        "checkout": "f" * 40,
        "torch": "2.13.0+cu129",
        "vllm": "0.29.0+cu129",
        "transformers": "5.14.0",
        "gpu": "NVIDIA H100 80GB",
        "cpu_core": 2,
        "torch_cpu_threads": 1,
        **{key: design[key] for key in ("warmup", "blocks", "iterations", "lengths")},
        "embedding_shape": [152064, 3584],
        "dtype": "bfloat16",
        "input_ids_dtype": "int32",
        "mask_device": "cpu",
        "start_time": 1789300000.0,
        "metric_order": metric_order,
        "end_time": 1789300100.0,
    }


def bench_module(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (the directory is on ``sys.path`` only meanwhile)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


class StepClock:
    """A seeded stand-in for the host's clocks (``harness.clock.Clock``), to put in the
    timing window with ``harness.clock.using``: time moves only when the code under test
    reads a clock (each read costs ``read_ns`` on the CPU, times a seeded lognormal
    jitter of sigma ``jitter``), spends (``spend``) or sleeps. So what a pair of calls
    costs is planted, and every timing the harness makes of it is the same on every
    machine. ``time`` stands in for the ``time`` module's clocks on the same time, for
    code that reads them directly (a factory's spins)."""

    def __init__(self, seed: int = 0, *, read_ns: int = 100, jitter: float = 0.05) -> None:
        self.rng = random.Random(seed)
        self.read_ns = read_ns
        self.jitter = jitter
        self.t_ns = 0  # wall time since the clock started
        self.cpu_ns = 0  # the calling thread's CPU time
        self.time = SimpleNamespace(
            perf_counter_ns=self.perf_ns,
            perf_counter=lambda: self.perf_ns() / 1e9,
            thread_time_ns=self.thread_ns,
            monotonic=self.monotonic,
            time=self.wall,
            sleep=self.sleep,
        )

    def _factor(self) -> float:
        return math.exp(self.jitter * self.rng.gauss(0.0, 1.0)) if self.jitter else 1.0

    def _on_cpu(self, ns: float) -> None:
        step = max(1, round(ns))
        self.t_ns += step
        self.cpu_ns += step

    # -- the Clock protocol

    def perf_ns(self) -> int:
        self._on_cpu(self.read_ns * self._factor())
        return self.t_ns

    def thread_ns(self) -> int:
        self._on_cpu(self.read_ns * self._factor())
        return self.cpu_ns

    def wall(self) -> float:
        return 1.8e9 + self.t_ns / 1e9

    def monotonic(self) -> float:
        return self.t_ns / 1e9

    def sleep(self, seconds: float) -> None:
        self.t_ns += round(seconds * 1e9)

    def minor_faults(self) -> int | None:
        return 0

    # -- planted work

    def spend(self, cpu_us: float, off_cpu_us: float = 0.0, *, jitter: float = 0.0) -> None:
        """One call's cost: ``cpu_us`` on the CPU (times a seeded lognormal factor of
        sigma ``jitter``) and ``off_cpu_us`` off it (a sleep, a wait)."""
        factor = math.exp(jitter * self.rng.gauss(0.0, 1.0)) if jitter else 1.0
        self._on_cpu(cpu_us * 1e3 * factor)
        self.t_ns += round(off_cpu_us * 1e3)

    def work(
        self, cpu_us: float, off_cpu_us: float = 0.0, *, jitter: float = 0.0
    ) -> Callable[[], None]:
        """A zero-argument call that spends ``cpu_us`` (and ``off_cpu_us``) on this clock."""

        def call() -> None:
            self.spend(cpu_us, off_cpu_us, jitter=jitter)

        return call


def simulated_aa_pair() -> dict[str, Callable[[], None]]:
    """A factory (``"helpers:simulated_aa_pair"``) for ``embedbench.sim.simulate_pair``:
    one callable that spends 1 ms of memory-bound work on the simulated host, under both
    labels."""
    from embedbench.sim import Work, spender

    call = spender(Work(0.0, 1000.0))
    return {"baseline": call, "fixed": call}
