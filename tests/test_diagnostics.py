"""Diagnostics on synthetic blocks with known disturbances."""

import json

import numpy as np
import pytest

from embedbench.harness import diagnostics as dg
from embedbench.harness import stats
from embedbench.harness.blocks import block_table


def _block(rng: np.random.Generator, center: float, calls: int = 20, noise: float = 0.01):
    return list(center * (1 + noise * rng.standard_normal(calls)))


def _pair(rng, n=20, base=100.0, ratio=0.9, noise=0.01):
    return (
        [_block(rng, base, noise=noise) for _ in range(n)],
        [_block(rng, base * ratio, noise=noise) for _ in range(n)],
    )


def _alternating(n: int) -> list[str]:
    return [dg.BASELINE if i % 2 == 0 else dg.FIXED for i in range(n)]


def test_injected_order_effect_is_found():
    rng = np.random.default_rng(1)
    first = _alternating(20)
    base, fixed = [], []
    for who in first:
        # The variant that runs first in a block pays 5 % (a cold cache, say).
        b, f = 100.0, 90.0
        if who == dg.BASELINE:
            b *= 1.05
        else:
            f *= 1.05
        base.append(_block(rng, b))
        fixed.append(_block(rng, f))
    result = dg.diagnose_pair(base, fixed, first=first)
    order = result.order_effect
    assert order is not None and order.detected
    assert order.n_baseline_first == order.n_fixed_first == 10
    # Baseline-first blocks look ~14 % faster, fixed-first ~5.5 %: about 9 points apart.
    assert order.difference_pct_points == pytest.approx(9.0, abs=1.5)
    assert order.p_value < 0.001
    assert any(line.startswith("order effect") for line in result.notes())


def test_no_order_effect_without_one():
    rng = np.random.default_rng(2)
    base, fixed = _pair(rng)
    order = dg.diagnose_pair(base, fixed, first=_alternating(20)).order_effect
    assert order is not None and not order.detected
    assert abs(order.difference_pct_points) < 1.5


def test_order_effect_needs_both_orders_and_valid_names():
    d = [0.1, 0.2, 0.3]
    one_sided = dg.order_effect(d, [dg.BASELINE] * 3)
    assert one_sided.p_value is None and not one_sided.detected
    with pytest.raises(ValueError):
        dg.order_effect(d, ["baseline", "other", "fixed"])
    with pytest.raises(ValueError):
        dg.order_effect(d, ["baseline"])


def test_linear_drift_is_found():
    rng = np.random.default_rng(3)
    n = 20
    # d_b drifts from -0.10 to -0.05 across the run; the baseline slows by 10 %.
    base = [_block(rng, 100.0 * (1 + 0.005 * i), noise=0.002) for i in range(n)]
    fixed = [
        _block(rng, 100.0 * (1 + 0.005 * i) * np.exp(-0.10 + 0.05 * i / n), noise=0.002)
        for i in range(n)
    ]
    d = dg.diagnose_pair(base, fixed).drift
    assert d.detected
    assert d.rho_log_ratio > 0.8 and d.p_log_ratio < 0.001
    assert d.rho_baseline > 0.8 and d.p_baseline < 0.001


def test_no_drift_in_stationary_blocks():
    rng = np.random.default_rng(4)
    base, fixed = _pair(rng)
    d = dg.diagnose_pair(base, fixed).drift
    assert not d.detected
    assert dg.drift([0.1, 0.1, 0.1], [1.0, 1.0, 1.0]).rho_log_ratio is None


def test_injected_outlier_block_is_flagged_and_moves_the_sensitivity_line():
    rng = np.random.default_rng(5)
    base, fixed = _pair(rng, ratio=0.9, noise=0.01)
    fixed[7] = _block(rng, 150.0)  # one block where fixed was preempted: 50 % slower
    out = dg.diagnose_pair(base, fixed).outliers
    assert out.flagged == [7]
    assert out.low < np.log(0.9) < out.high
    assert out.hl_reduction_pct_without != out.hl_reduction_pct_all
    assert out.reduction_pct_without != out.reduction_pct_all
    # Without the outlier the estimate is closer to the true 10 %.
    assert abs(out.hl_reduction_pct_without - 10.0) < abs(out.hl_reduction_pct_all - 10.0)
    tukey = dg.outlier_blocks(stats.block_medians(base), stats.block_medians(fixed), rule="tukey")
    assert 7 in tukey.flagged
    with pytest.raises(ValueError):
        dg.outlier_blocks([1.0], [1.0], rule="other")


def test_clean_blocks_flag_nothing_and_the_sensitivity_line_does_not_move():
    rng = np.random.default_rng(6)
    base, fixed = _pair(rng)
    out = dg.diagnose_pair(base, fixed).outliers
    assert out.flagged == []
    assert out.reduction_pct_without == out.reduction_pct_all


def test_within_block_spread_is_iqr_over_median():
    spread = dg.within_block_spread({"baseline": [[1, 2, 3, 4, 5], [10, 10]], "fixed": [[]]})
    # [1..5]: Q1 2, Q3 4, median 3 -> 2/3.
    assert spread.per_block["baseline"] == pytest.approx([2 / 3, 0.0])
    assert spread.median["baseline"] == pytest.approx(1 / 3)
    assert spread.max["baseline"] == pytest.approx(2 / 3)
    assert spread.per_block["fixed"] == [None] and spread.median["fixed"] is None


def test_three_percent_mhz_dip_is_flagged():
    mhz = [[3000.0, 3000.0, 3001.0, 2999.0] for _ in range(20)]
    mhz[12] = [3000.0, 2910.0, 2910.0, 3000.0]  # a 3 % dip
    freq = dg.frequency_excursions(mhz)
    assert freq.observable and freq.flagged == [12]
    assert freq.deviation_pct[12] == pytest.approx(3.0)
    assert freq.median_mhz == pytest.approx(3000.0)


def test_unavailable_or_constant_mhz_is_not_observable():
    none = dg.frequency_excursions([[None, None]] * 5)
    assert not none.observable and none.flagged is None and "unavailable" in none.reason
    assert not dg.frequency_excursions(None).observable
    constant = dg.frequency_excursions([[2400.0, 2400.0]] * 5)
    assert not constant.observable and constant.flagged is None
    assert constant.median_mhz == 2400.0


def test_diagnose_table_of_raw_records_serializes():
    rng = np.random.default_rng(7)
    records = []
    for block, who in enumerate(_alternating(10)):
        order = [who, dg.FIXED if who == dg.BASELINE else dg.BASELINE]
        for position, variant in enumerate(order):
            center = 100.0 if variant == dg.BASELINE else 90.0
            records.append(
                {
                    "block": block,
                    "position": position,
                    "variant": variant,
                    "samples_us": [[x, x, x] for x in _block(rng, center)],
                    "cpu_mhz_start": None,
                    "cpu_mhz_end": None,
                }
            )
    result = dg.diagnose_table(block_table(records))
    assert result.blocks == 10
    assert result.order_effect.n_baseline_first == 5
    assert not result.frequency.observable
    row = result.to_json()
    json.dumps(row, allow_nan=False)
    assert set(row) >= {"order_effect", "drift", "outliers", "spread", "frequency"}
    with pytest.raises(ValueError):
        dg.diagnose_table(block_table(records[:-1]))
