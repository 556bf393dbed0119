"""Statistics on synthetic numbers with known answers."""

import json

import numpy as np
import pytest

from embedbench.harness import stats


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
    s = stats.summarize_pair(base, fixed)
    assert s.reduction_pct == pytest.approx(20.0, abs=1.0)
    low, high = s.reduction_ci95_pct
    assert low < 20.0 < high
    assert low > 0
    assert s.verdict == stats.FASTER
    assert s.blocks == 20


def test_slower_variant_is_called_slower():
    rng = np.random.default_rng(2)
    s = stats.summarize_pair(_blocks(rng, 100.0), _blocks(rng, 110.0))
    assert s.reduction_ci95_pct[1] < 0
    assert s.verdict == stats.SLOWER


def test_identical_distribution_is_not_a_difference():
    rng = np.random.default_rng(4)
    s = stats.summarize_pair(_blocks(rng, 50.0), _blocks(rng, 50.0))
    low, high = s.reduction_ci95_pct
    assert low <= 0.0 <= high
    assert s.verdict == stats.NO_DIFFERENCE


def test_an_interval_below_95_percent_names_no_direction():
    assert stats.verdict((5.0, 10.0), level=1 - 2 / 32) == stats.NO_DIFFERENCE
    assert stats.verdict((5.0, 10.0), level=0.9688) == stats.FASTER
    assert stats.verdict((-10.0, -5.0)) == stats.SLOWER
    assert stats.verdict((-1.0, 5.0)) == stats.NO_DIFFERENCE
    assert stats.verdict((5.0, 10.0), valid=False) == stats.INVALID


def test_five_blocks_give_a_hodges_lehmann_interval_labelled_with_its_true_level():
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    interval = stats.hodges_lehmann_interval(base, [0.8 * b for b in base])
    assert interval.level == pytest.approx(0.9375)
    assert interval.method == stats.WITHIN_PROCESS and interval.units == 5
    s = stats.summarize_pair([[b] for b in base], [[0.8 * b] for b in base])
    assert s.to_json()["ci_level"] == pytest.approx(0.9375)
    assert s.verdict == stats.NO_DIFFERENCE


def test_percentiles_are_named():
    p = stats.percentiles(list(range(101)))
    assert p == {"p5": 5.0, "p50": 50.0, "p95": 95.0}


# --- paired log-ratio analysis --------------------------------------------------------------


def _medians(rng: np.random.Generator, center: float, n: int, noise: float) -> np.ndarray:
    return center * (1 + noise * rng.standard_normal(n))


def test_log_ratios_are_paired_per_block():
    d = stats.log_ratios([100.0, 200.0], [50.0, 200.0])
    assert d.tolist() == pytest.approx([np.log(0.5), 0.0])
    with pytest.raises(ValueError):
        stats.log_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        stats.log_ratios([0.0], [1.0])


def test_signed_rank_null_distribution_is_exact():
    # n = 3: T+ takes 0..6 with counts 1,1,1,2,1,1,1 over 8 sign patterns.
    cdf = stats.signed_rank_cdf(3)
    assert (np.diff(np.concatenate([[0.0], cdf])) * 8).tolist() == [1, 1, 1, 2, 1, 1, 1]
    assert cdf[-1] == pytest.approx(1.0)


def test_hodges_lehmann_interval_matches_the_textbook_order_statistics():
    # n = 10 at 95 %: the signed-rank critical value is 8, so the interval is
    # [W_(9), W_(47)] of the 55 sorted Walsh averages (Hollander & Wolfe, Table A.4).
    d = np.arange(1.0, 11.0)
    hl = stats.hodges_lehmann(d)
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(10) for j in range(i, 10)])
    assert hl.estimate == pytest.approx(np.median(walsh)) == pytest.approx(5.5)
    assert hl.ci == (walsh[8], walsh[46])
    assert 0.95 <= hl.confidence < 0.96


def test_hodges_lehmann_interval_cannot_reach_95_percent_with_five_blocks():
    hl = stats.hodges_lehmann([0.1, 0.2, 0.3, 0.4, 0.5])
    assert hl.ci == (0.1, 0.5)
    assert hl.confidence == pytest.approx(1 - 2 / 32)


def test_wilcoxon_p_agrees_with_the_exact_sign_pattern_count():
    p, method = stats.wilcoxon_p([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert method == "exact"
    assert p == pytest.approx(2 / 2**6)
    assert stats.wilcoxon_p([0.0, 0.0]) == (1.0, "all zero")
    assert stats.wilcoxon_p([]) == (None, "none")


def test_wilcoxon_refuses_significance_with_five_blocks():
    assert stats.min_achievable_p(5) == pytest.approx(0.0625)
    assert not stats.significance_reachable(5)
    assert stats.significance_reachable(6)
    # Five blocks all 20 % faster: the best p possible is still 0.0625.
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    s = stats.summarize_pair([[b] for b in base], [[0.8 * b] for b in base])
    assert s.wilcoxon_p == pytest.approx(0.0625)
    assert not s.significance_reachable
    assert s.verdict == stats.NO_DIFFERENCE


def test_paired_statistics_detect_a_shift_and_not_its_absence():
    rng = np.random.default_rng(11)
    base = _medians(rng, 100.0, 20, 0.02)
    shifted = stats.paired_statistics(base, _medians(rng, 95.0, 20, 0.02))
    # sd of the estimate is about sqrt(2) * 2 % / sqrt(20) = 0.63 %: allow 3 sd.
    assert shifted.hl_reduction_pct == pytest.approx(5.0, abs=2.0)
    # Detected: the interval excludes 0 (its coverage of the truth is tested below).
    low, high = shifted.hl_ci95_pct
    assert 0 < low < shifted.hl_reduction_pct < high
    assert shifted.wilcoxon_p < 0.001
    same = stats.paired_statistics(base, _medians(rng, 100.0, 20, 0.02))
    assert same.hl_ci95_pct[0] <= 0.0 <= same.hl_ci95_pct[1]
    assert same.wilcoxon_p > 0.05


def test_hodges_lehmann_interval_coverage_is_near_nominal():
    # d is symmetric about ln(0.9) because both variants share the same noise law.
    rng = np.random.default_rng(7452)
    truth = np.log(0.9)
    runs, covered = 300, 0
    for _ in range(runs):
        base = _medians(rng, 100.0, 20, 0.05)
        fixed = _medians(rng, 90.0, 20, 0.05)
        low, high = stats.hodges_lehmann(stats.log_ratios(base, fixed)).ci
        covered += low <= truth <= high
    # Nominal 0.95; the binomial sd over 300 runs is 0.013, so this is a ±4 sd band.
    assert 0.90 <= covered / runs <= 0.99


def test_mde_shrinks_with_the_square_root_of_the_block_count():
    sd = 0.02
    m20 = stats.detectable_log_effect(sd, 20)
    m80 = stats.detectable_log_effect(sd, 80)
    m320 = stats.detectable_log_effect(sd, 320)
    # Four times the blocks halves the MDE, up to the t quantiles approaching z.
    assert 0.45 < m80 / m20 < 0.5
    assert 0.48 < m320 / m80 < 0.5
    assert m320 * np.sqrt(320) / sd == pytest.approx(1.96 + 0.84, abs=0.03)
    # Less efficient tests need more units: 3/pi of the blocks count for the signed rank.
    assert stats.detectable_log_effect(sd, 20, efficiency=3 / np.pi) > m20
    with pytest.raises(ValueError):
        stats.detectable_log_effect(sd, 1)


def test_summary_carries_the_paired_fields_and_serializes():
    rng = np.random.default_rng(12)
    s = stats.summarize_pair(_blocks(rng, 100.0), _blocks(rng, 90.0))
    assert len(s.log_ratios) == 20
    assert s.hl_reduction_pct == pytest.approx(10.0, abs=1.0)
    assert s.hl_ci95_pct[0] < s.hl_reduction_pct < s.hl_ci95_pct[1]
    assert s.wilcoxon_p < 1e-4 and s.wilcoxon_method == "exact"
    assert s.significance_reachable and s.mde_pct > 0
    row = s.to_json()
    assert row["reduction_ci95_pct"] == list(s.reduction_ci95_pct)
    assert row["interval_method"] == stats.WITHIN_PROCESS and row["workers"] == 1
    assert row["hl_ci95_pct"] == list(s.hl_ci95_pct)
    json.dumps(row, allow_nan=False)


def test_workers_switch_the_interval_to_the_between_process_t():
    rng = np.random.default_rng(14)
    base, fixed = _blocks(rng, 100.0), _blocks(rng, 90.0)
    s = stats.summarize_pair(base, fixed, workers=[b // 4 for b in range(20)])
    row = s.to_json()
    assert row["interval_method"] == stats.BETWEEN_PROCESSES
    assert row["workers"] == 5 and row["interval_units"] == 5 and row["ci_level"] == 0.95
    assert len(row["worker_reduction_pct"]) == 5
    low, high = s.reduction_ci95_pct
    assert low < row["interval_estimate_pct"] < high
    assert s.verdict == stats.FASTER
    with pytest.raises(ValueError):
        stats.summarize_pair(base, fixed, workers=[0, 1])


def test_the_reduction_difference_is_welchs_interval_of_the_headlines():
    a, b = [20.0, 22.0, 18.0, 21.0], [30.0, 29.0, 33.0]
    diff = stats.reduction_difference(a, b)
    theta = [np.log1p(-np.asarray(x) / 100) for x in (a, b)]
    headlines = [100 * (1 - np.exp(t.mean())) for t in theta]
    assert diff.difference_pp == pytest.approx(headlines[1] - headlines[0])
    assert diff.units == (4, 3) and diff.excludes_zero
    same = stats.reduction_difference(a, a)
    assert same.difference_pp == 0 and same.low == pytest.approx(-same.high)
    with pytest.raises(ValueError, match="at least 2 workers"):
        stats.reduction_difference([20.0], b)


def test_the_reduction_difference_covers_a_true_difference_about_95_percent_of_the_time():
    """Two runs of 5 workers each, true reductions 20 % and 25 %: the delta-method Welch
    interval holds the true 5 pp in about 95 % of 2000 seeded pairs."""
    rng = np.random.default_rng(11)
    true_a, true_b, sd = np.log(0.80), np.log(0.75), 0.05
    covered = 0
    for _ in range(2000):
        a = 100 * (1 - np.exp(true_a + sd * rng.standard_normal(5)))
        b = 100 * (1 - np.exp(true_b + sd * rng.standard_normal(5)))
        diff = stats.reduction_difference(a, b)
        covered += diff.low <= 5.0 <= diff.high
    assert 0.93 <= covered / 2000 <= 0.97
