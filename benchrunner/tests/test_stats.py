import math

import pytest

from benchrunner import stats


def test_describe_known_sample():
    s = stats.describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.n == 8
    assert s.mean == 5.0
    assert s.median == 4.5
    assert s.stdev == pytest.approx(2.138, abs=1e-3)
    half = 2.365 * s.stdev / math.sqrt(8)  # t(0.975, 7 dof)
    assert s.ci95_low == pytest.approx(5.0 - half)
    assert s.ci95_high == pytest.approx(5.0 + half)
    assert (s.minimum, s.maximum) == (2.0, 9.0)


def test_single_value_has_a_zero_width_interval():
    s = stats.describe([3.5])
    assert (s.stdev, s.ci95_low, s.ci95_high) == (0.0, 3.5, 3.5)


def test_t_critical_values_fall_back_to_the_nearest_smaller_table_entry():
    assert stats.t_critical_95(1) == 12.706
    assert stats.t_critical_95(22) == 2.086
    assert stats.t_critical_95(1000) == 1.96
    with pytest.raises(ValueError):
        stats.t_critical_95(0)


@pytest.mark.parametrize("values", [[], [1.0, float("nan")], [float("inf")]])
def test_rejects_empty_and_non_finite(values):
    with pytest.raises(ValueError):
        stats.describe(values)


def test_batch_means_average_consecutive_equal_batches_dropping_the_first_steps():
    assert stats.batch_means([9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], batches=3) == [1.5, 3.5, 5.5]
    assert stats.batch_means(list(range(100)), batches=10)[0] == 4.5
    assert len(stats.batch_means([1.0] * 20)) == 10 and len(stats.batch_means([1.0] * 7)) == 3
    assert stats.batch_means([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]


def test_correlated_steps_get_a_wider_interval_from_batch_means():
    # Slow drift: consecutive steps alike, the whole window not; single steps understate the uncertainty.
    drifting = [0.1 + 0.001 * i for i in range(100)]
    single = stats.describe(drifting)
    batched = stats.describe(stats.batch_means(drifting))
    assert batched.ci95_high - batched.ci95_low > single.ci95_high - single.ci95_low
