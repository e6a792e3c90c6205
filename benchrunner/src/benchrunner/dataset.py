"""A small ChestX-ray14-style dataset, made from nothing, so the real-data path is tested end to end.

The layout follows the NIH release: grayscale PNGs in `images/` and `Data_Entry_2017.csv`, whose
`Finding Labels` column holds the findings of each image joined by '|' (or 'No Finding').
Pure Python (zlib for PNG), so it runs on the control host and on nodes alike.
"""

from __future__ import annotations

import csv
import io
import json
import random
import socket
import struct
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchrunner import models, results, tokens

if TYPE_CHECKING:
    from benchrunner.workload import Workload

FINDINGS = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia",
            "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia")
NO_FINDING = "No Finding"
LABELS_CSV = "Data_Entry_2017.csv"
IMAGES_DIR = "images"
MANIFEST = "dataset.json"
# Where `benchrunner dataset --tfrecord-shards` writes TensorFlow's shards of the same images.
TFRECORD_DIR = "tfrecord"
CSV_COLUMNS = ("Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age", "Patient Gender",
               "View Position", "OriginalImage[Width", "Height]", "OriginalImagePixelSpacing[x", "y]")


@dataclass(frozen=True)
class Spec:
    images: int = 256
    image_size: int = 64
    seed: int = 0

    def validate(self) -> None:
        # The smallest image the models accept is 32 px (ResNet-50; Inception-v3 needs 75); below 8 there is no
        # chest to draw. PNG's header holds sizes up to 2**31 - 1; beyond a few thousand pixels this is not useful.
        if not 1 <= self.images:
            raise ValueError(f"--images must be at least 1 (got {self.images})")
        if not 8 <= self.image_size <= 4096:
            raise ValueError(f"--image-size must be 8 to 4096 pixels (got {self.image_size})")


def png_gray(width: int, height: int, pixels: bytes) -> bytes:
    """Encode 8-bit grayscale pixels (row-major) as a PNG file."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")


def _image(rng: random.Random, size: int, findings: list[str]) -> bytes:
    # A bright band for the chest, noise, and a blob per finding: enough structure to decode and learn from.
    centre = size / 2
    blobs = [(rng.uniform(0.2, 0.8) * size, rng.uniform(0.2, 0.8) * size, 40 + 10 * FINDINGS.index(f))
             for f in findings]
    pixels = bytearray(size * size)
    for y in range(size):
        for x in range(size):
            value = 200 - abs(x - centre) * 300 / size + rng.randint(-20, 20)
            for bx, by, strength in blobs:
                if (x - bx) ** 2 + (y - by) ** 2 < (size / 10) ** 2:
                    value += strength
            pixels[y * size + x] = max(0, min(255, int(value)))
    return png_gray(size, size, bytes(pixels))


def generate(directory: Path, spec: Spec) -> Path:
    """Write the dataset; a folder that already holds this same spec is left as it is."""
    spec.validate()
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{directory}: exists and is not a folder; give the dataset a folder of its own")
    manifest = directory / MANIFEST
    if manifest.exists() and json.loads(manifest.read_text()).get("spec") == asdict(spec):
        return directory
    rng = random.Random(spec.seed)
    rows = []
    for index in range(spec.images):
        patient = index // 3 + 1
        name = f"{patient:08d}_{index % 3:03d}.png"
        findings = sorted(rng.sample(FINDINGS, rng.choice((0, 0, 1, 1, 2, 3))), key=FINDINGS.index)
        path = directory / IMAGES_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_image(rng, spec.image_size, findings))
        rows.append((name, "|".join(findings) or NO_FINDING, index % 3, patient, rng.randint(18, 90),
                     rng.choice("MF"), rng.choice(("PA", "AP")), spec.image_size, spec.image_size, 0.143, 0.143))
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(rows)
    results.write_atomic(directory / LABELS_CSV, text.getvalue())
    # Written last: its presence says the dataset is complete.
    results.write_atomic(manifest, json.dumps({"format": "chestxray14", "spec": asdict(spec),
                                               "findings": list(FINDINGS)}, indent=2) + "\n")
    return directory


def read_labels(directory: Path) -> list[tuple[str, list[float]]]:
    """(image path, multi-hot vector over FINDINGS) for every row of the labels CSV."""
    entries = []
    with open(directory / LABELS_CSV, newline="") as handle:
        for row in csv.DictReader(handle):
            names = [] if row["Finding Labels"] == NO_FINDING else row["Finding Labels"].split("|")
            unknown = set(names) - set(FINDINGS)
            if unknown:
                raise ValueError(f"{directory / LABELS_CSV}: unknown findings {sorted(unknown)} for {row['Image Index']}")
            entries.append((str(directory / IMAGES_DIR / row["Image Index"]),
                            [1.0 if f in names else 0.0 for f in FINDINGS]))
    if not entries:
        raise ValueError(f"{directory / LABELS_CSV}: no images listed")
    return entries


def dataset_problem(workload: Workload, ranks: int) -> str | None:
    """Why the workload's dataset cannot feed this many ranks as its data mode reads it (images: the labels CSV and
    every PNG it lists; tfrecord: a shard per rank; tokens: a token folder whose ids fit the model's vocabulary,
    holding a window of sequence_length + 1 tokens), or None. Asked on the launching host before a job
    is written or started: the ranks would otherwise each fail on their own, after the launch."""
    if workload.data == "synthetic":
        return None
    directory = Path(workload.data_dir or ".")
    make = (f"benchrunner dataset --tokens {directory} --text FILE [FILE ...]" if workload.data == "tokens" else
            f"benchrunner dataset {directory}" + (f" --tfrecord-shards {ranks}" if workload.data == "tfrecord" else ""))
    if not directory.is_dir():
        return (f"data_dir {directory} {'is not a folder' if directory.exists() else 'does not exist'} on "
                f"{socket.gethostname()}, the launching host, which must see the dataset at the nodes' path: make "
                f"it with `{make}`, or leave data_dir out for the benchmark play to make it")
    if workload.data == "tokens":
        found = tokens.problem(directory, workload.sequence_length, models.get(workload.model).vocab_size)
        return found and f"{found}; `{make}` makes a token folder"
    if workload.data == "tfrecord":
        shards = len(list((directory / TFRECORD_DIR).glob("*.tfrecord")))
        return None if shards >= ranks else (
            f"{directory / TFRECORD_DIR}: {shards} TFRecord shard files for {ranks} ranks, which read one file at "
            f"least each: write them with `{make}`")
    labels = directory / LABELS_CSV
    try:
        entries = read_labels(directory)
    except OSError as exc:
        return f"{labels}: {exc.strerror}; images data reads the labels CSV and the PNGs of `{make}`"
    except (KeyError, ValueError, csv.Error) as exc:
        return f"{labels}: not a ChestX-ray14 labels CSV ({exc}); `{make}` writes one"
    missing = [path for path, _ in entries if not Path(path).is_file()]
    if missing:
        return (f"{directory / IMAGES_DIR}: {len(missing)} of the {len(entries)} images {labels.name} lists "
                f"are missing (first {missing[0]}); write the dataset again with `{make}`")
    if len(entries) < ranks:
        return f"{labels}: {len(entries)} images cannot be shared by {ranks} ranks, which read one image at least each"
    return None
