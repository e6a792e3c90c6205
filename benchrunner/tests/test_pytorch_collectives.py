"""The torch collectives sweep's accounting, without a process group (test_pytorch_ranks runs it for real)."""

from __future__ import annotations

import pytest
import torch

from benchrunner.frameworks._torch import collectives

CPU = torch.device("cpu")


@pytest.mark.parametrize("prepare", [collectives.prepare_all_gather, collectives.prepare_all_gather_list,
                                     collectives.prepare_reduce_scatter])
@pytest.mark.parametrize(("size", "ranks", "counted"), [(1024, 2, 1024), (1024, 8, 1024), (8, 2, 8),
                                                        (8, 4, 16), (1024, 3, 1020)])
def test_gather_and_scatter_count_the_whole_of_n_parts_as_nccl_tests_does(prepare, size, ranks, counted):
    # n parts of whole float32 elements, at least one each: what nccl-tests counts when ranks do not divide a size.
    assert prepare(size, ranks, CPU)[0] == counted


def test_all_reduce_counts_its_message():
    assert collectives.prepare_all_reduce(4096, 3, CPU)[0] == 4096


def test_an_operation_the_backend_lacks_is_reported_and_any_other_failure_raised():
    def lacking() -> None:
        raise RuntimeError("Backend gloo does not support reduce_scatter")

    def broken() -> None:
        raise RuntimeError("Connection closed by peer")

    assert collectives.unsupported(lambda: None) is None
    assert collectives.unsupported(lacking) == "Backend gloo does not support reduce_scatter"
    with pytest.raises(RuntimeError, match="Connection closed"):
        collectives.unsupported(broken)


def test_an_operation_is_timed_after_an_untimed_pass_with_one_synchronisation_each():
    calls: list[str] = []
    seconds = collectives.seconds_per_operation(lambda: calls.append("op"), 3, lambda: calls.append("sync"))
    assert calls == ["op"] * 3 + ["sync"] + ["op"] * 3 + ["sync"] and seconds >= 0
