"""The training loop's timing and the learning-rate schedule, run without TensorFlow."""

import math

import pytest

from benchrunner import train
from benchrunner.workload import Workload


class Clock:
    """A clock that moves only when the fake input or step says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run_loop(waits: list[float], computes: list[float], losses: list[float], warmup: int = 2):
    clock, seen = Clock(), []

    def next_batch() -> int:
        clock.now += waits[len(seen)]
        return len(seen)

    def step(number: int, batch: int) -> float:
        assert number == batch
        clock.now += computes[number]
        seen.append(number)
        return losses[number]

    traced = []

    def after_first(batch: int) -> None:
        clock.now += 50.0  # tracing the steady-state step: outside every measured step
        traced.append(batch)

    workload = Workload(warmup_steps=warmup, measured_steps=len(waits) - warmup)
    return train.measure(workload, next_batch, step, after_first, clock=clock, wall=lambda: 7.0), traced


def test_each_measured_step_is_timed_from_its_batch_request_and_its_input_wait_recorded_apart():
    waits, computes = [0.5, 0.1, 0.03, 0.0, 0.02], [2.0, 0.2, 0.1, 0.1, 0.1]
    measured, traced = run_loop(waits, computes, [2.3, 2.2, 2.1, 2.0, 1.9])
    assert measured.step_times == pytest.approx([0.13, 0.1, 0.12])
    assert measured.input_waits == pytest.approx([0.03, 0.0, 0.02])
    assert measured.measured_s == pytest.approx(0.35)
    assert measured.first_step_done == 7.0 and traced == [0]
    assert measured.losses == [2.3, 2.2, 2.1, 2.0, 1.9]


def test_a_non_finite_loss_is_recorded_as_null():
    measured, _ = run_loop([0.0] * 3, [0.1] * 3, [2.0, math.inf, math.nan], warmup=1)
    assert measured.losses == [2.0, None, None]


def test_input_wait_figures_of_a_rank():
    measured, _ = run_loop([0.0, 0.0, 0.03, 0.01, 0.02], [0.1] * 5, [1.0] * 5)
    figures = train.input_wait(measured)
    assert figures["total_s"] == pytest.approx(0.06)
    assert figures["fraction_of_step_time"] == pytest.approx(0.06 / 0.36)
    assert figures["per_step_s"]["n"] == 3 and figures["per_step_s"]["maximum"] == pytest.approx(0.03)


@pytest.mark.parametrize(("settings", "unit", "per_step"), [
    ({"model": "resnet50", "batch_size": 32}, "images", 32),
    ({"model": "resnet50", "batch_size": 32, "gradient_accumulation_steps": 4}, "images", 128),
    ({"model": "llama-tiny", "batch_size": 8, "sequence_length": 128}, "tokens", 1024),
    ({"model": "llama-tiny", "batch_size": 8, "sequence_length": 128, "gradient_accumulation_steps": 2}, "tokens",
     2048),
])
def test_a_rank_counts_samples_per_second_in_its_workload_s_unit(tmp_path, settings, unit, per_step):
    workload = Workload.from_mapping({**settings, "warmup_steps": 1, "measured_steps": 4})
    assert (workload.unit, workload.units_per_step()) == (unit, per_step)
    measured = train.Measurement(step_times=[0.1, 0.1, 0.1, 0.2], input_waits=[0.0] * 4, losses=[1.0] * 5,
                                 measured_s=0.5, first_step_done=train.PROCESS_STARTED_AT + 1)
    metrics = train.measurements(workload, measured, train.RunContext("r", tmp_path, "mpirun"), 0.0)["metrics"]
    # Units per optimizer step x measured steps / the measured wall time.
    assert (metrics["unit"], metrics["samples_per_sec"]) == (unit, pytest.approx(per_step * 4 / 0.5))


def rates(workload: Workload, size: int) -> list[float]:
    return [train.learning_rate(workload, size, step) for step in range(workload.warmup_steps + workload.measured_steps)]


def test_a_constant_rate_is_scaled_by_the_ranks_unless_told_not_to():
    assert rates(Workload(learning_rate=0.01), 4) == pytest.approx([0.04] * 110)
    assert rates(Workload.from_mapping({"preset": "horovod_synthetic"}), 8) == [0.01] * 110


def test_warmup_ramps_linearly_from_the_one_rank_rate_to_the_scaled_one():
    workload = Workload(learning_rate=0.1, lr_warmup_steps=4, warmup_steps=2, measured_steps=6)
    assert rates(workload, 5) == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.5, 0.5])


def test_cosine_decays_from_the_peak_after_warmup_to_zero_at_the_last_step():
    workload = Workload(learning_rate=0.1, lr_schedule="cosine", lr_warmup_steps=2, warmup_steps=2, measured_steps=7)
    got = rates(workload, 2)
    # Steps 2..8 decay over 6 intervals: the peak 0.2, half of it at step 5, 0 at step 8.
    assert got[:3] == pytest.approx([0.1, 0.15, 0.2])
    assert got[5] == pytest.approx(0.1) and got[8] == pytest.approx(0.0, abs=1e-12)
    assert all(a >= b for a, b in zip(got[2:], got[3:]))
