"""Statistics on synthetic numbers with known answers."""

import numpy as np
import pytest

from embedbench import stats


def _blocks(
    rng: np.random.Generator,
    center: float,
    n_blocks: int = 20,
    n_calls: int = 20,
    noise: float = 0.02,
) -> list[list[float]]:
    return [list(center * (1 + noise * rng.standard_normal(n_calls))) for _ in range(n_blocks)]


def test_block_medians_and_median_of_medians():
    blocks = [[1, 2, 3], [10, 20, 30, 40], [5]]
    assert stats.block_medians(blocks).tolist() == [2.0, 25.0, 5.0]
    assert stats.median_of_block_medians(blocks) == 5.0


def test_reduction_pct_matches_the_pr_formula():
    assert stats.reduction_pct(104.32, 85.30) == pytest.approx(18.23, abs=0.005)
    assert stats.reduction_pct(100.0, 110.0) == pytest.approx(-10.0)
    with pytest.raises(ValueError):
        stats.reduction_pct(0.0, 1.0)


def test_shifted_distribution_is_detected_with_an_interval_around_the_truth():
    rng = np.random.default_rng(1)
    base = _blocks(rng, 100.0)
    fixed = _blocks(rng, 80.0)
    s = stats.summarize_pair(base, fixed, seed=3)
    assert s.reduction_pct == pytest.approx(20.0, abs=1.0)
    low, high = s.reduction_ci95_pct
    assert low < 20.0 < high
    assert low > 0
    assert s.verdict == stats.FASTER
    assert s.blocks == 20


def test_slower_variant_is_called_slower():
    rng = np.random.default_rng(2)
    s = stats.summarize_pair(_blocks(rng, 100.0), _blocks(rng, 110.0), seed=0)
    assert s.reduction_ci95_pct[1] < 0
    assert s.verdict == stats.SLOWER


def test_identical_distribution_is_not_a_difference():
    rng = np.random.default_rng(4)
    s = stats.summarize_pair(_blocks(rng, 50.0), _blocks(rng, 50.0), seed=0)
    low, high = s.reduction_ci95_pct
    assert low <= 0.0 <= high
    assert s.verdict == stats.NO_DIFFERENCE


def test_bootstrap_is_seeded_and_uses_enough_resamples():
    rng = np.random.default_rng(5)
    a = stats.block_medians(_blocks(rng, 100.0))
    b = stats.block_medians(_blocks(rng, 90.0))
    assert stats.bootstrap_reduction_ci(a, b, seed=9) == stats.bootstrap_reduction_ci(a, b, seed=9)
    assert stats.bootstrap_reduction_ci(a, b, seed=9) != stats.bootstrap_reduction_ci(a, b, seed=10)
    assert stats.BOOTSTRAP_RESAMPLES >= 2000


def test_bootstrap_rejects_unpaired_blocks():
    with pytest.raises(ValueError):
        stats.bootstrap_reduction_ci([1.0, 2.0], [1.0], seed=0)


def test_too_few_blocks_never_claim_a_direction():
    assert stats.verdict((5.0, 10.0), blocks=5) == stats.NO_DIFFERENCE
    assert stats.verdict((5.0, 10.0), blocks=6) == stats.FASTER
    assert stats.verdict((-10.0, -5.0), blocks=6) == stats.SLOWER
    assert stats.verdict((5.0, 10.0), blocks=20, valid=False) == stats.INVALID


def test_interval_coverage_is_near_nominal_in_a_seeded_simulation():
    rng = np.random.default_rng(7451)
    truth = 100.0 * (1 - 90.0 / 100.0)
    runs, covered = 200, 0
    for i in range(runs):
        base = stats.block_medians(_blocks(rng, 100.0, noise=0.05))
        fixed = stats.block_medians(_blocks(rng, 90.0, noise=0.05))
        low, high = stats.bootstrap_reduction_ci(base, fixed, seed=i, resamples=500)
        covered += low <= truth <= high
    assert 0.85 <= covered / runs <= 1.0


def test_percentiles_are_named():
    p = stats.percentiles(list(range(101)))
    assert p == {"p5": 5.0, "p50": 50.0, "p95": 95.0}
