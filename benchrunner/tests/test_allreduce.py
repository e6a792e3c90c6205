import pytest

from benchrunner import provenance, sweep
from benchrunner.frameworks.tensorflow_horovod import collectives as allreduce


def test_sizes_are_powers_of_two_from_8_bytes_to_256_mib():
    sizes = sweep.sizes()
    assert sizes[0] == 8 and sizes[-1] == 256 * 1024 * 1024 and len(sizes) == 26
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))


def test_sizes_refuse_an_empty_or_sub_element_range():
    with pytest.raises(ValueError):
        sweep.sizes(2, 8)
    with pytest.raises(ValueError):
        sweep.sizes(64, 8)


@pytest.mark.parametrize(("ranks", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n(ranks, factor):
    assert sweep.bus_bandwidth(10.0, ranks) == pytest.approx(10.0 * factor)


def test_iterations_shrink_with_message_size_within_bounds():
    assert sweep.iterations_for(8) == 100
    assert sweep.iterations_for(64 * 1024 * 1024) == 16
    assert sweep.iterations_for(256 * 1024 * 1024) == 5


@pytest.mark.parametrize(("code", "version"), [(0, None), (21805, "2.18.5"), (2708, "2.7.8")])
def test_nccl_version_codes(code, version):
    assert provenance.nccl_version(code) == version


def test_hcas_are_read_from_sysfs(tmp_path):
    port = tmp_path / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "rate").write_text("200 Gb/sec (4X HDR)\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (tmp_path / "mlx5_0" / "fw_ver").write_text("20.31.1014\n")
    assert provenance.hcas(str(tmp_path)) == [{"name": "mlx5_0", "board_id": "", "fw_ver": "20.31.1014", "ports": [
        {"port": 1, "state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}]}]
    assert provenance.hcas(str(tmp_path / "absent")) == []


class FakeTensor:
    def __init__(self, log: list[str], generation: int = 0) -> None:
        self.log, self.generation = log, generation

    def numpy(self) -> float:
        self.log.append("to host")
        return 1.0

    def __getitem__(self, _: int) -> "FakeTensor":
        return self


class FakeTF:
    float32 = "float32"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def function(self, fn):
        return fn

    def ones(self, shape, dtype):
        return FakeTensor(self.log)

    def reshape(self, tensor, shape):
        return tensor


class FakeHorovod:
    Average = "average"

    def allreduce(self, tensor: FakeTensor, op: str) -> FakeTensor:
        tensor.log.append(f"allreduce {op} of generation {tensor.generation}")
        return FakeTensor(tensor.log, tensor.generation + 1)


def test_the_sweep_times_back_to_back_operations_with_one_synchronisation():
    log: list[str] = []
    count, seconds = allreduce.seconds_per_operation(FakeTF(log), FakeHorovod(), 64 * 1024 * 1024)
    assert count == 16 and seconds >= 0
    # Untimed warmup, then the timed call: each is `count` chained allreduces and a single read to the host.
    chained = [f"allreduce average of generation {g}" for g in range(count)]
    assert log == [*chained, "to host", *chained, "to host"]


def test_message_sizes_must_be_whole_float32_elements():
    with pytest.raises(ValueError, match=r"min a multiple of 4 .* got min 6, max 64"):
        sweep.sizes(6, 64)


class FakeSweepHorovod(FakeHorovod):
    """Two ranks, this one rank 1 (which writes nothing), each operation's time the slowest rank's."""

    Max = "max"

    def allreduce(self, tensor: FakeTensor, op: str, name: str | None = None) -> FakeTensor:
        return super().allreduce(tensor, op)

    def size(self) -> int:
        return 2

    def rank(self) -> int:
        return 1

    def shutdown(self) -> None:
        pass


class FakeSweepTF(FakeTF):
    float64 = "float64"

    def constant(self, value: float, dtype: str) -> FakeTensor:
        return FakeTensor(self.log)


def test_the_sweep_records_the_provenance_of_its_run_context(monkeypatch, tmp_path):
    # TensorFlow and Horovod are not on the control host: the sweep's own code runs against stand-ins, so that what
    # it hands provenance (this rank's run context) is checked where unit tests run.
    from benchrunner.frameworks.tensorflow_horovod import collectives  # noqa: PLC0415 - the module under test
    from benchrunner.train import RunContext  # noqa: PLC0415

    log: list[str] = []
    handed = []
    monkeypatch.setattr(collectives, "init_horovod", lambda workload: (FakeSweepTF(log), FakeSweepHorovod()))
    monkeypatch.setattr(collectives.provenance, "collect",
                        lambda tf, hvd, context: handed.append(context) or {"launcher": context.launcher})
    context = RunContext(run_id="r1", output_dir=tmp_path, launcher="srun", stack="slurm")
    document = collectives.run(context, 64, 128)
    assert handed == [context] and document["provenance"] == {"launcher": "srun"}
    assert [point["bytes"] for point in document["points"]] == [64, 128] and document["ranks"] == 2
    assert not list(tmp_path.iterdir())
