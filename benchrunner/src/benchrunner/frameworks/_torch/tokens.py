"""Input for text models in torch: one synthetic batch of token ids made once on the device, or windows of a token
folder (benchrunner.tokens) that each rank draws at random through a memory map of its array, as nanoGPT's get_batch
reads train.bin. Batches are (inputs, targets), each batch_size x sequence_length int64, the targets the inputs
shifted by one token."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from benchrunner import tokens
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.workload import Workload

# The token arrays' dtypes as torch reads them (torch.uint16 and uint32 since torch 2.3).
TORCH_DTYPES = {"uint16": torch.uint16, "uint32": torch.uint32}


def _split(sequences: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of batch x (length + 1) token ids: the sequences without their last token, and without
    their first."""
    sequences = sequences.to(device=device, dtype=torch.int64)
    return sequences[:, :-1], sequences[:, 1:]


def synthetic(workload: Workload, vocab_size: int, rank: int,
              device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The same batch forever, ids drawn uniformly below the vocabulary (seeded by rank), made once and put on the
    device once, so the input is not what is measured."""
    generator = torch.Generator().manual_seed(rank)
    inputs, targets = _split(torch.randint(vocab_size, [workload.batch_size, workload.sequence_length + 1],
                                           generator=generator), device)
    while True:
        yield inputs, targets


def windows(workload: Workload, vocab_size: int, rank: int,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of windows of the token folder at data_dir, their starts drawn uniformly by a generator seeded by the
    rank, one draw after the other (a step's windows are its place in the rank's stream): ranks read different
    windows, and a run reads the same ones again. The array is memory-mapped (copy-on-write: nothing is written back),
    so only the pages of the windows drawn are read."""
    directory = Path(workload.data_dir or ".")
    problem = tokens.problem(directory, workload.sequence_length, vocab_size)
    if problem:
        raise ValueError(problem)
    if sys.byteorder != tokens.BYTE_ORDER:
        # torch maps the file in the machine's order; the array is little-endian whatever wrote it.
        raise ValueError(f"{directory}: token arrays are {tokens.BYTE_ORDER}-endian, this machine is {sys.byteorder}-"
                         "endian")
    folder = tokens.read(directory)
    array = torch.from_file(str(folder.bin), shared=False, size=folder.tokens, dtype=TORCH_DTYPES[folder.dtype])
    return _draws(array, workload.batch_size, workload.sequence_length + 1, rank, device)


def _draws(array: torch.Tensor, batch_size: int, window: int, rank: int,
           device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    # One seed per rank, not per rank and step: torch's CPU generator keeps 32 bits of a seed, so seeds made of both
    # would repeat between ranks.
    offsets, generator = torch.arange(window), torch.Generator().manual_seed(rank)
    while True:
        starts = torch.randint(len(array) - window + 1, [batch_size, 1], generator=generator)
        yield _split(array[starts + offsets], device)


def batches(workload: Workload, vocab_size: int, placement: Placement,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) batches of a text workload, for a model of this vocabulary: synthetic, or a token folder."""
    if workload.data == "synthetic":
        return synthetic(workload, vocab_size, placement.rank, device)
    if workload.data != "tokens":
        raise ValueError(f"data {workload.data!r} does not feed text models: use 'synthetic' or 'tokens'")
    return windows(workload, vocab_size, placement.rank, device)
