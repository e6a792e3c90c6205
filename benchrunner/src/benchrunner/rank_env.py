"""What a launcher tells every rank through its environment, beside the rank program's own options."""

from __future__ import annotations

LAUNCHED_AT_ENV = "BENCHRUNNER_LAUNCHED_AT"
# `benchrunner rank` runs the program these arguments name (train or allreduce).
RANK_ARGV_ENV = "BENCHRUNNER_RANK_ARGV"
# "1" when the job asks every rank to train on a GPU of its own: the rank records where it trained, and sanity fails
# a run whose ranks asked for a GPU and trained on the CPU.
GPU_ENV = "BENCHRUNNER_GPU"
