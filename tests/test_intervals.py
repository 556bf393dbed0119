"""The interval the verdict uses, checked by seeded simulation (docs/method.md).

The model has the noise a real run sees: a worker-level random effect (what differs
between processes: memory placement, heap layout, the moment it ran), block noise
shared by both variants of a block, block noise of each variant, and call noise. The
tolerances are tight enough that the previous design fails them: an interval of the
pooled blocks (blind to the workers) covers far less than 95 %, and a verdict that
also had to clear the A/A band missed most real 4 % reductions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from embedbench.config import RunConfig
from embedbench.errors import ConfigError
from embedbench.harness import stats
from embedbench.harness.timing import block_schedule
from embedbench.report import summary

WORKERS, PER_WORKER, CALLS = 5, 4, 20


def _simulate(
    rng: np.random.Generator,
    log_effect: float,
    *,
    workers: int = WORKERS,
    per_worker: int = PER_WORKER,
    worker_sd: float = 0.02,
    shared_sd: float = 0.01,
    block_sd: float = 0.01,
) -> tuple[list[list[float]], list[list[float]], list[int]]:
    """Per-block call samples of both variants and each block's worker."""
    base_blocks, fixed_blocks, labels = [], [], []
    for w in range(workers):
        level = rng.normal(0.0, 0.03)  # the whole process is slower or faster
        ratio = rng.normal(0.0, worker_sd)  # ... and so is the comparison in it
        for _ in range(per_worker):
            shared = rng.normal(0.0, shared_sd)
            for blocks, shift in ((base_blocks, 0.0), (fixed_blocks, log_effect + ratio)):
                centre = 1000.0 * math.exp(level + shared + shift + rng.normal(0.0, block_sd))
                blocks.append(list(centre * (1.0 + 0.01 * rng.standard_normal(CALLS))))
            labels.append(w)
    return base_blocks, fixed_blocks, labels


def _records(base: list[list[float]], fixed: list[list[float]], labels: list[int]) -> list[dict]:
    """Raw block records (micro-raw.json rows) for the simulated blocks."""
    rows = []
    for block, (b, f, w) in enumerate(zip(base, fixed, labels, strict=True)):
        for position, (variant, samples) in enumerate((("baseline", b), ("fixed", f))):
            rows.append(
                {
                    "case": "audio",
                    "tokens": 1172,
                    "scope": "whole_wrapper",
                    "variant": variant,
                    "block": block,
                    "position": (position + block) % 2,
                    "worker": w,
                    "iterations": len(samples),
                    "samples_us": [[x, x, x] for x in samples],
                    "wall_start": float(block),
                    "wall_end": float(block) + 0.5,
                    "cpu_mhz_start": None,
                    "cpu_mhz_end": None,
                }
            )
    return rows


def test_the_between_process_interval_covers_95_percent_with_a_worker_effect():
    rng = np.random.default_rng(7451)
    truth = stats.log_to_reduction_pct(math.log(0.55))
    runs, covered, pooled_covered = 1500, 0, 0
    for _ in range(runs):
        base, fixed, labels = _simulate(rng, math.log(0.55))
        low, high = stats.summarize_pair(base, fixed, workers=labels).reduction_ci95_pct
        covered += low <= truth <= high
        # The same blocks as if from one process: blind to the worker effect.
        p_low, p_high = stats.summarize_pair(base, fixed).reduction_ci95_pct
        pooled_covered += p_low <= truth <= p_high
    # Binomial sd over 1500 runs is 0.0056: a band of about ±3.5 sd around 0.95.
    assert 0.93 <= covered / runs <= 0.97
    assert pooled_covered / runs < 0.85


def test_the_interval_stays_calibrated_when_block_noise_dominates():
    rng = np.random.default_rng(7452)
    truth = stats.log_to_reduction_pct(math.log(0.7))
    runs, covered = 1000, 0
    for _ in range(runs):
        base, fixed, labels = _simulate(
            rng, math.log(0.7), worker_sd=0.0, shared_sd=0.03, block_sd=0.015
        )
        low, high = stats.summarize_pair(base, fixed, workers=labels).reduction_ci95_pct
        covered += low <= truth <= high
    # Never below 95 %; above it by the floor of the block noise, which the workers'
    # sample variance falls under about half the time when they share no effect.
    assert 0.94 <= covered / runs <= 0.99


def test_workers_that_agree_by_chance_never_narrow_the_interval_below_their_block_noise():
    # No worker effect, so the workers' headlines differ by their block noise alone; in
    # the runs where they happen to agree most closely (the lowest quarter of their
    # sample SD), a plain t interval over 4 df is too narrow and misses the truth far
    # more often than 1 in 20. Floored by the block noise, it covers there too.
    rng = np.random.default_rng(7453)
    truth = math.log(0.7)
    runs = []
    for _ in range(1200):
        base, fixed, labels = _simulate(rng, truth, worker_sd=0.0, shared_sd=0.03)
        summary_ = stats.summarize_pair(base, fixed, workers=labels)
        theta = np.log1p(-np.asarray(summary_.interval.unit_reductions_pct) / 100)
        low, high = summary_.reduction_ci95_pct
        runs.append((float(np.std(theta, ddof=1)), low <= 100 * (1 - math.exp(truth)) <= high))
    runs.sort()
    closest = [hit for _, hit in runs[: len(runs) // 4]]
    # Binomial sd over 300 runs at 0.95 is 0.013.
    assert sum(closest) / len(closest) >= 0.93


def test_a_rerun_lands_inside_the_first_runs_interval_as_often_as_calibration_says():
    # Two independent runs: run j's headline inside run i's 95 % interval. With a
    # calibrated interval and the headline at its centre that is P(|T_4| < t_4/√2),
    # about 0.88 for 5 workers (0.83 with a known sd); a too-narrow interval gives less.
    rng = np.random.default_rng(83)
    pairs, hits = 600, 0
    for _ in range(pairs):
        first, second = (
            stats.summarize_pair(*_simulate(rng, math.log(0.6))[:2], workers=_LABELS)
            for _ in range(2)
        )
        low, high = first.reduction_ci95_pct
        hits += low <= second.reduction_pct <= high
    assert 0.80 <= hits / pairs <= 0.94


_LABELS = [w for w in range(WORKERS) for _ in range(PER_WORKER)]


def test_the_headline_is_the_prs_statistic_per_process_combined_over_processes():
    rng = np.random.default_rng(15)
    base, fixed, labels = _simulate(rng, math.log(0.6))
    s = stats.summarize_pair(base, fixed, workers=labels)
    per_worker = {
        v: [
            np.median(stats.block_medians(blocks)[[i for i, w in enumerate(labels) if w == k]])
            for k in range(WORKERS)
        ]
        for v, blocks in (("baseline", base), ("fixed", fixed))
    }
    for v in ("baseline", "fixed"):
        assert s.host_us[v] == pytest.approx(math.exp(np.mean(np.log(per_worker[v]))))
    # The headline is the interval's centre; the pooled PR statistic is kept beside it.
    assert s.reduction_pct == pytest.approx(s.interval.estimate_pct)
    pooled = stats.reduction_pct(
        float(np.median(stats.block_medians(base))), float(np.median(stats.block_medians(fixed)))
    )
    assert s.pooled_reduction_pct == pytest.approx(pooled)
    assert s.pr_reduction_pct == pytest.approx(s.reduction_pct)
    # One process: exactly the PR's median of block medians, whose ratio is kept beside
    # the headline (the Hodges–Lehmann estimate, the centre of its interval).
    one = stats.summarize_pair(base, fixed)
    assert one.host_us["baseline"] == float(np.median(stats.block_medians(base)))
    assert one.pr_reduction_pct == pytest.approx(pooled)
    assert one.reduction_pct == one.interval.estimate_pct == one.hl_reduction_pct


def _theta_sd(rng: np.random.Generator, runs: int = 400) -> float:
    """The sd of one worker's own headline under the model, from a pilot at no effect."""
    thetas = []
    for _ in range(runs):
        base, fixed, labels = _simulate(rng, 0.0)
        interval = stats.summarize_pair(base, fixed, workers=labels).interval
        thetas.extend(math.log(1 - r / 100.0) for r in interval.unit_reductions_pct)
    return float(np.std(thetas, ddof=1))


def test_the_reported_mde_is_found_with_80_percent_power_by_the_verdict_rule():
    rng = np.random.default_rng(80)
    mde_log = stats.detectable_log_effect(_theta_sd(rng), WORKERS)
    runs, faster, reported = 1000, 0, []
    for _ in range(runs):
        base, fixed, labels = _simulate(rng, -mde_log)
        s = stats.summarize_pair(base, fixed, workers=labels)
        faster += s.verdict == stats.FASTER
        reported.append(s.mde_pct)
    # Binomial sd 0.013: ±0.05 is a ±4 sd band around the stated 0.8.
    assert 0.75 <= faster / runs <= 0.85
    # What a run reports is that effect, up to the noise of one run's sd estimate.
    true_mde_pct = 100.0 * (1.0 - math.exp(-mde_log))
    assert np.median(reported) == pytest.approx(true_mde_pct, rel=0.15)


def test_the_one_process_mde_is_found_with_80_percent_power_by_the_verdict_rule():
    rng = np.random.default_rng(81)
    sd, n = 0.02, 20
    zeros = [[1000.0]] * n
    probe = stats.summarize_pair(
        zeros, [[1000.0 * math.exp(sd * z)] for z in rng.standard_normal(n)]
    )
    m = stats.detectable_log_effect(sd, n, alpha=1 - probe.interval.level, efficiency=3 / math.pi)
    runs, faster = 1000, 0
    for _ in range(runs):
        d = -m + sd * rng.standard_normal(n)
        fixed = [[1000.0 * math.exp(x)] for x in d]
        faster += stats.summarize_pair(zeros, fixed).verdict == stats.FASTER
    assert 0.75 <= faster / runs <= 0.85


def test_the_aa_check_never_changes_the_verdict_or_costs_power():
    # A true 4 % reduction against a noise whose MDE is about 2 %: the verdict finds it
    # almost always, with or without the A/A check beside it.
    rng = np.random.default_rng(4)
    runs, faster, mdes = 200, 0, []
    for _ in range(runs):
        ab = _records(*_simulate(rng, math.log(0.96), worker_sd=0.006, shared_sd=0.005))
        aa = summary.aa_summary(_records(*_simulate(rng, 0.0, worker_sd=0.006, shared_sd=0.005)))
        with_aa = summary.summary_row("audio", 1172, ab, seed=0, aa=aa)
        without = summary.summary_row("audio", 1172, ab, seed=0)
        assert with_aa["verdict"] == without["verdict"]
        assert with_aa["reduction_ci95_pct"] == without["reduction_ci95_pct"]
        assert with_aa["aa"]["covers_zero"] == (
            aa["reduction_ci95_pct"][0] <= 0.0 <= aa["reduction_ci95_pct"][1]
        )
        faster += with_aa["verdict"] == stats.FASTER
        mdes.append(with_aa["mde_pct"])
    assert 1.0 < np.median(mdes) < 3.0
    assert faster / runs >= 0.9


def test_an_even_block_count_cancels_a_position_effect_and_odd_counts_are_refused():
    # The same code under both labels, 5 % slower whenever it runs second in a block.
    rng = np.random.default_rng(5)
    headlines = []
    for seed in range(300):
        order = block_schedule(("baseline", "fixed"), 20, seed)
        blocks = {"baseline": [], "fixed": []}
        for first, second in order:
            for name, factor in ((first, 1.0), (second, 1.05)):
                noise = 1.0 + 0.002 * rng.standard_normal(CALLS)
                blocks[name].append(list(1000.0 * factor * noise))
        headlines.append(
            abs(stats.summarize_pair(blocks["baseline"], blocks["fixed"]).reduction_pct)
        )
    # An odd count (21) gives one order an extra block: mean |A/A headline| ~1.7 %.
    assert np.mean(headlines) < 0.7
    with pytest.raises(ConfigError, match="blocks must be even"):
        RunConfig(blocks=21)


def test_every_worker_gets_an_even_share_of_consecutive_blocks():
    for blocks, processes in ((20, 5), (20, 3), (6, 3), (40, 7), (4, 1)):
        spans = RunConfig(blocks=blocks, processes=processes).worker_blocks()
        assert len(spans) == processes
        assert [b for span in spans for b in span] == list(range(blocks))
        assert all(len(span) % 2 == 0 and len(span) >= 2 for span in spans)
        assert max(map(len, spans)) - min(map(len, spans)) <= 2
    with pytest.raises(ConfigError, match="at most blocks / 2"):
        RunConfig(blocks=6, processes=5)


def test_the_block_noise_floor_is_robust_to_one_slow_block_and_needs_two_blocks_a_worker():
    rng = np.random.default_rng(5)
    base = [list(1000 * np.exp(rng.normal(0, 0.02, 4))) for _ in range(5)]
    fixed = [list(np.asarray(b) * 0.7 * np.exp(rng.normal(0, 0.02, 4))) for b in base]
    quiet = stats.within_worker_variance(base, fixed)
    assert quiet is not None and 0.5 * 0.02**2 / 4 < quiet < 3 * 0.02**2 / 4
    fixed[0][0] *= 30.0  # one block 30 times slower, as a worker's first block can be
    assert stats.within_worker_variance(base, fixed) < 2 * quiet
    assert stats.within_worker_variance([[1.0], [2.0]], [[1.0], [2.0]]) is None
