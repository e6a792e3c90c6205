"""Input for training in torch: one synthetic batch made once on the device, or a ChestX-ray14-style folder of
PNG images read by a DataLoader, each rank its own part, as TensorFlow's data module feeds the TensorFlow path."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

from benchrunner import dataset
from benchrunner.frameworks._torch.distributed import Placement
from benchrunner.frameworks._torch.settings import TorchSettings
from benchrunner.workload import Workload

try:
    from PIL import Image
except ImportError:
    # Pillow decodes every PNG, quickly; without it, decode_png reads the 8-bit PNGs of ChestX-ray14 and of
    # benchrunner.dataset in Python.
    Image = None

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# 8-bit colour types decode_png reads, and their samples per pixel: grey, RGB, grey + alpha, RGBA.
PNG_SAMPLES = {0: 1, 2: 3, 4: 2, 6: 4}


def synthetic(workload: Workload, rank: int, device: torch.device,
              memory_format: torch.memory_format) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The same batch forever, made once and put on the device once, so the input is not what is measured."""
    generator = torch.Generator().manual_seed(rank)
    images = torch.rand([workload.batch_size, 3, workload.image_size, workload.image_size], generator=generator)
    if workload.multi_label:
        labels = (torch.rand([workload.batch_size, workload.classes], generator=generator) > 0.5).float()
    else:
        labels = torch.randint(workload.classes, [workload.batch_size], generator=generator)
    images, labels = images.to(device, memory_format=memory_format), labels.to(device)
    while True:
        yield images, labels


def _unfilter(raw: bytes, width: int, height: int, samples: int) -> bytearray:
    """Undo PNG's per-row filters (RFC 2083, 6): each byte was stored as the difference from a prediction made
    from the byte `samples` to its left (a), the one above (b) and the one above that left one (c)."""
    stride = width * samples
    if len(raw) != height * (stride + 1):
        raise ValueError(f"image data holds {len(raw)} bytes, not the {height * (stride + 1)} of {width}x{height}")
    pixels = bytearray(height * stride)
    prior = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(samples, stride):
                line[i] = (line[i] + line[i - samples]) & 255
        elif kind == 2:
            line = bytearray((x + b) & 255 for x, b in zip(line, prior))
        elif kind == 3:
            for i in range(stride):
                left = line[i - samples] if i >= samples else 0
                line[i] = (line[i] + (left + prior[i]) // 2) & 255
        elif kind == 4:
            for i in range(stride):
                a, b = (line[i - samples], prior[i]) if i >= samples else (0, prior[i])
                c = prior[i - samples] if i >= samples else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif kind != 0:
            raise ValueError(f"row {y} has filter type {kind}, which PNG does not define")
        pixels[y * stride:(y + 1) * stride] = line
        prior = line
    return pixels


def decode_png(data: bytes) -> torch.Tensor:
    """An 8-bit, non-interlaced PNG (what ChestX-ray14 and benchrunner.dataset hold) as height x width x samples
    uint8: its IHDR and IDAT chunks, inflated, unfiltered."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG file")
    header, compressed, position = b"", [], len(PNG_SIGNATURE)
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length  # length, type, body, CRC
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    if len(header) != 13 or not compressed:
        raise ValueError("PNG file without its IHDR or IDAT chunk")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in PNG_SAMPLES or interlace:
        raise ValueError(f"PNG of bit depth {depth}, colour type {colour}, interlace {interlace}: without Pillow only "
                         "8-bit, non-interlaced grey, grey + alpha, RGB and RGBA images are read")
    samples = PNG_SAMPLES[colour]
    pixels = _unfilter(zlib.decompress(b"".join(compressed)), width, height, samples)
    return torch.frombuffer(pixels, dtype=torch.uint8).view(height, width, samples)


def read_rgb(path: Path) -> torch.Tensor:
    """The image at `path` as height x width x 3 uint8, as tf.io.decode_png(channels=3) gives it: grey repeated
    into three channels, alpha dropped."""
    if Image is not None:
        with Image.open(path) as image:
            rgb = image.convert("RGB")
        return torch.frombuffer(bytearray(rgb.tobytes()), dtype=torch.uint8).view(rgb.height, rgb.width, 3)
    try:
        pixels = decode_png(path.read_bytes())
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    grey = pixels.shape[2] < 3
    return pixels[:, :, :1].expand(-1, -1, 3) if grey else pixels[:, :, :3]


def load(path: Path, image_size: int) -> torch.Tensor:
    """3 x size x size floats in [0, 1]: decoded, resized bilinearly (tf.image.resize's default, whose half-pixel
    centres are align_corners=False), scaled."""
    image = read_rgb(path).permute(2, 0, 1).float().unsqueeze(0)
    if image.shape[-2:] != (image_size, image_size):
        image = F.interpolate(image, size=(image_size, image_size), mode="bilinear", align_corners=False)
    return image[0] / 255.0


class ImageFiles(Dataset):
    """(image, multi-hot findings) for each listed file, flipped left to right at random (CheXNet's augmentation)."""

    def __init__(self, entries: list[tuple[str, list[float]]], image_size: int) -> None:
        self.entries = entries
        self.image_size = image_size

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        path, findings = self.entries[index]
        image = load(Path(path), self.image_size)
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        return image, torch.tensor(findings, dtype=torch.float32)


class Forever(Sampler[int]):
    """Shuffled passes over the items, one after the other without end: batches run on across passes, as tf.data's
    shuffle().repeat().batch() does, so a rank whose part is smaller than a batch still fills its batches."""

    def __init__(self, length: int, seed: int) -> None:
        self.length = length
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed)
        while True:
            yield from torch.randperm(self.length, generator=generator).tolist()


def shard(workload: Workload, placement: Placement) -> list[tuple[str, list[float]]]:
    """This rank's part of the labels CSV: every size-th entry from its rank on, as Dataset.shard splits it."""
    entries = dataset.read_labels(Path(workload.data_dir or "."))
    if len(entries) < placement.world_size:
        raise ValueError(f"{workload.data_dir}: {len(entries)} images cannot be sharded over {placement.world_size} "
                         "ranks")
    return entries[placement.rank::placement.world_size]


def images(workload: Workload, settings: TorchSettings, placement: Placement, device: torch.device,
           memory_format: torch.memory_format) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of this rank's images, decoded by `dataloader_workers` processes, moved to the device."""
    entries = shard(workload, placement)
    loader = DataLoader(ImageFiles(entries, workload.image_size), batch_size=workload.batch_size,
                        sampler=Forever(len(entries), placement.rank), num_workers=settings.dataloader_workers,
                        pin_memory=settings.pin_memory and device.type == "cuda", drop_last=True,
                        # Seeds the workers' random flips, so a rank's run is repeatable.
                        generator=torch.Generator().manual_seed(placement.rank))
    for batch_images, labels in loader:
        # From pinned memory the copies are asynchronous: the step's kernels queue behind them on the GPU.
        yield (batch_images.to(device, non_blocking=True, memory_format=memory_format),
               labels.to(device, non_blocking=True))


def batches(workload: Workload, settings: TorchSettings, placement: Placement,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images N x 3 x H x W, labels) batches: class indices, or float multi-hot findings for multi-label
    workloads. TFRecord data is refused before this (TorchSettings.problems)."""
    memory_format = torch.channels_last if settings.channels_last else torch.contiguous_format
    if workload.data == "synthetic":
        return synthetic(workload, placement.rank, device, memory_format)
    return images(workload, settings, placement, device, memory_format)
