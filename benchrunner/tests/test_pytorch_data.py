"""Input for the torch ranks: the synthetic batch, the PNG decoder, and the images folder split between ranks."""

from __future__ import annotations

import io
import itertools
import random
import struct
import zlib
from pathlib import Path

import pytest
import torch

from benchrunner import dataset
from benchrunner.frameworks._torch import data
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.frameworks.pytorch_ddp import Settings
from benchrunner.workload import Workload

CPU = torch.device("cpu")


def placement(rank: int, size: int) -> Placement:
    return Placement(rank, size, rank, size, "torchrun")


@pytest.mark.parametrize("model", ["small_cnn", "densenet121_chexnet"])
def test_synthetic_data_is_one_batch_made_once(model):
    workload = Workload(model=model, batch_size=4, image_size=32, num_classes=7)
    batches = data.synthetic(workload, 1, CPU, torch.contiguous_format)
    images, labels = next(batches)
    assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
    again = next(batches)
    assert again[0] is images and again[1] is labels
    if workload.multi_label:
        assert labels.shape == (4, 14) and labels.dtype == torch.float32 and set(labels.unique().tolist()) <= {0.0, 1.0}
    else:
        assert labels.shape == (4,) and labels.dtype == torch.int64 and 0 <= labels.min() <= labels.max() < 7
    other_rank = next(data.synthetic(workload, 2, CPU, torch.contiguous_format))[0]
    assert not torch.equal(other_rank, images)


def test_synthetic_data_takes_the_memory_format_asked_for():
    images, _ = next(data.synthetic(Workload(batch_size=2, image_size=8), 0, CPU, torch.channels_last))
    assert images.is_contiguous(memory_format=torch.channels_last)


def filtered_png(pixels: bytes, width: int, height: int, colour: int, filters: list[int]) -> bytes:
    """A PNG whose rows use the given filter types (RFC 2083, 6.2-6.6), to check their inverse."""
    samples = data.PNG_SAMPLES[colour]
    stride = width * samples
    rows, prior = [], bytes(stride)
    for y in range(height):
        line, kind = pixels[y * stride:(y + 1) * stride], filters[y % len(filters)]
        out = bytearray()
        for i, x in enumerate(line):
            a = line[i - samples] if i >= samples else 0
            b = prior[i]
            c = prior[i - samples] if i >= samples else 0
            p = a + b - c
            paeth = min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]
            out.append((x - (0, a, b, (a + b) // 2, paeth)[kind]) & 255)
        rows.append(bytes([kind]) + bytes(out))
        prior = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    compressed = zlib.compress(b"".join(rows))
    # IDAT split in two, as encoders may: the decoder joins them.
    return (data.PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"tEXt", b"Comment\x00x")
            + chunk(b"IDAT", compressed[:5]) + chunk(b"IDAT", compressed[5:]) + chunk(b"IEND", b""))


@pytest.mark.parametrize("colour", sorted(data.PNG_SAMPLES))
def test_the_png_decoder_undoes_every_filter_type(colour):
    rng = random.Random(colour)
    width, height, samples = 7, 10, data.PNG_SAMPLES[colour]
    pixels = bytes(rng.randrange(256) for _ in range(width * height * samples))
    decoded = data.decode_png(filtered_png(pixels, width, height, colour, [0, 1, 2, 3, 4]))
    assert decoded.shape == (height, width, samples)
    assert bytes(decoded.flatten().tolist()) == pixels


def test_the_png_decoder_reads_what_pillow_writes():
    image_module = pytest.importorskip("PIL.Image")
    rng = random.Random(1)
    for mode in ("L", "LA", "RGB", "RGBA"):
        pixels = bytes((x * 7 + y * 13 + rng.randrange(4)) % 256 for y in range(9) for x in range(11 * len(mode)))
        buffer = io.BytesIO()
        image_module.frombytes(mode, (11, 9), pixels).save(buffer, "PNG")  # Pillow filters adaptively (types 1, 4)
        assert bytes(data.decode_png(buffer.getvalue()).flatten().tolist()) == pixels


def test_the_png_decoder_refuses_what_it_cannot_read():
    sixteen_bit = data.PNG_SIGNATURE + struct.pack(">I", 13) + b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 16, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="bit depth 16"):
        data.decode_png(sixteen_bit + b"\0\0\0\0" + struct.pack(">I", 1) + b"IDAT" + b"x" + b"\0\0\0\0")
    with pytest.raises(ValueError, match="not a PNG"):
        data.decode_png(b"GIF89a")


@pytest.fixture(scope="module")
def chestxray(tmp_path_factory) -> Path:
    return dataset.generate(tmp_path_factory.mktemp("chestxray"), dataset.Spec(images=10, image_size=20, seed=3))


def test_images_decode_alike_with_pillow_and_without(chestxray, monkeypatch):
    path = chestxray / dataset.IMAGES_DIR / "00000001_000.png"
    pytest.importorskip("PIL")
    with_pillow = data.read_rgb(path)
    monkeypatch.setattr(data, "Image", None)
    without = data.read_rgb(path)
    assert without.shape == (20, 20, 3) and torch.equal(with_pillow, without)
    # Grey, repeated into three channels as tf.io.decode_png(channels=3) does.
    assert torch.equal(without[:, :, 0], without[:, :, 2])


def test_an_image_is_resized_and_scaled_to_the_unit_interval(chestxray):
    image = data.load(chestxray / dataset.IMAGES_DIR / "00000001_000.png", 12)
    assert image.shape == (3, 12, 12) and image.dtype == torch.float32
    assert 0.0 <= image.min() < image.max() <= 1.0


def test_each_rank_reads_its_own_part_with_the_findings_as_labels(chestxray):
    workload = Workload(data="images", data_dir=str(chestxray))
    entries = dataset.read_labels(chestxray)
    parts = [data.shard(workload, placement(rank, 3)) for rank in range(3)]
    assert [len(part) for part in parts] == [4, 3, 3]
    assert sorted(itertools.chain(*parts)) == sorted(entries)
    assert parts[1] == entries[1::3]
    with pytest.raises(ValueError, match="10 images cannot be sharded over 11 ranks"):
        data.shard(workload, placement(0, 11))


def test_the_forever_sampler_runs_shuffled_passes_one_after_another():
    indices = list(itertools.islice(iter(data.Forever(5, seed=0)), 15))
    passes = [indices[i:i + 5] for i in (0, 5, 10)]
    assert all(sorted(p) == [0, 1, 2, 3, 4] for p in passes) and passes[0] != passes[1]


@pytest.mark.parametrize("workers", [0, 1])
def test_the_loader_fills_every_batch_across_passes_of_a_small_part(chestxray, workers):
    # Rank 1 of 2 holds 5 images; batches of 4 run on across passes, flipped at random, findings as labels.
    workload = Workload(data="images", data_dir=str(chestxray), batch_size=4, image_size=8)
    mine = {tuple(findings) for _, findings in data.shard(workload, placement(1, 2))}
    batches = data.batches(workload, Settings(dataloader_workers=workers), placement(1, 2), CPU)
    for images, labels in itertools.islice(batches, 3):
        assert images.shape == (4, 3, 8, 8) and labels.shape == (4, 14) and labels.dtype == torch.float32
        assert {tuple(row) for row in labels.tolist()} <= mine
