"""Descriptive statistics for step times and throughputs."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

# Two-sided 95% Student-t critical values by degrees of freedom; 1.96 beyond the table.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
        18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t_critical_95(dof: int) -> float:
    if dof < 1:
        raise ValueError("a confidence interval needs at least two samples")
    known = [d for d in _T95 if d <= dof]
    return _T95[max(known)] if dof <= 120 else 1.96


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    stdev: float
    minimum: float
    maximum: float
    ci95_low: float
    ci95_high: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def batch_means(values: list[float], batches: int = 10) -> list[float]:
    """Means of consecutive, equal batches of the values (the first few dropped to make them equal).

    Consecutive training steps are correlated (caches, clocks, the network's state), so an interval over single
    steps is too narrow; one over the means of batches of steps is the usual remedy. Fewer than 4 values stay as
    they are.
    """
    if len(values) < 4:
        return list(values)
    count = min(batches, len(values) // 2)
    size = len(values) // count
    tail = values[len(values) - count * size:]
    return [statistics.fmean(tail[i * size:(i + 1) * size]) for i in range(count)]


def describe(values: list[float]) -> Summary:
    if not values:
        raise ValueError("no values to describe")
    if any(math.isnan(v) or math.isinf(v) for v in values):
        raise ValueError("values contain NaN or infinity")
    n = len(values)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n > 1 else 0.0
    half = t_critical_95(n - 1) * stdev / math.sqrt(n) if n > 1 else 0.0
    return Summary(n=n, mean=mean, median=statistics.median(values), stdev=stdev,
                   minimum=min(values), maximum=max(values), ci95_low=mean - half, ci95_high=mean + half)
