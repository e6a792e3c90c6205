"""TensorFlow's input: synthetic tensors, or a tf.data pipeline over a ChestX-ray14-style dataset."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchrunner import dataset
from benchrunner.dataset import TFRECORD_DIR
from benchrunner.frameworks.tensorflow_horovod import AUTOTUNE, CACHE_IN_MEMORY
from benchrunner.workload import Workload


def synthetic(tf: Any, workload: Workload, rank: int) -> Iterator[tuple[Any, Any]]:
    """The same batch forever, made once on the device, so the input pipeline is not what is measured."""
    shape = [workload.batch_size, workload.image_size, workload.image_size, 3]
    images = tf.random.uniform(shape, seed=rank)
    if workload.multi_label:
        labels = tf.cast(tf.random.uniform([workload.batch_size, workload.classes], seed=rank) > 0.5, tf.float32)
    else:
        labels = tf.random.uniform([workload.batch_size], maxval=workload.classes, dtype=tf.int64, seed=rank)
    while True:
        yield images, labels


def _load(tf: Any, workload: Workload, encoded: Any, labels: Any) -> tuple[Any, Any]:
    """The deterministic part of the input: what a cache may hold."""
    image = tf.io.decode_png(encoded, channels=3)
    image = tf.image.resize(image, [workload.image_size, workload.image_size])
    return image / 255.0, labels


def _flip(tf: Any, image: Any, labels: Any, seed: int) -> tuple[Any, Any]:
    # Light augmentation, as CheXNet trained with random horizontal flips.
    return tf.image.random_flip_left_right(image, seed=seed), labels


def parallelism(tf: Any, value: int | str) -> int:
    return tf.data.AUTOTUNE if value == AUTOTUNE else int(value)


def cache_file(workload: Workload, rank: int, size: int, sources: list[Path]) -> str:
    """This rank's cache file prefix. A file cache is read back whatever the pipeline before it has become
    (tf.data.Dataset.cache, TF 2.15), so its name holds everything that decides what it holds: the data, the
    image size, the rank's shard, and the size and time of every source file."""
    key = {"data": workload.data, "data_dir": workload.data_dir, "image_size": workload.image_size,
           "sources": [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sources]}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    # TF 2.15 writes the files but does not make their folder (NotFoundError on the .lockfile).
    Path(workload.settings.cache or ".").mkdir(parents=True, exist_ok=True)
    return f"{workload.settings.cache}/benchrunner-{digest}-rank{rank:05d}-of-{size:05d}"


def _gpu(tf: Any) -> str:
    if not tf.config.list_logical_devices("GPU"):
        raise ValueError("prefetch_to_device: this rank sees no GPU to prefetch to")
    # Each rank sees only its own GPU (train._configure_devices), so it is always the first.
    return "/gpu:0"


def _finish(tf: Any, records: Any, encoded: Any, workload: Workload, rank: int, size: int,
            sources: list[Path]) -> Iterator[Any]:
    """From records (`encoded` turns one into a PNG and its labels) to batches: decode, cache, augment, shuffle,
    batch and prefetch, as the workload says."""
    calls = parallelism(tf, workload.settings.num_parallel_calls)

    def load(*record: Any) -> tuple[Any, Any]:
        return _load(tf, workload, *encoded(*record))

    if workload.settings.cache is None:
        images = records.map(lambda *record: _flip(tf, *load(*record), rank), num_parallel_calls=calls)
    else:
        # Cached after decoding and before the random flip and the shuffle, so those stay random on every pass.
        decoded = records.map(load, num_parallel_calls=calls)
        decoded = decoded.cache() if workload.settings.cache == CACHE_IN_MEMORY else decoded.cache(
            cache_file(workload, rank, size, sources))
        images = decoded.map(lambda image, y: _flip(tf, image, y, rank), num_parallel_calls=calls)
    pipeline = (images.shuffle(1024, seed=rank, reshuffle_each_iteration=True).repeat()
                .batch(workload.batch_size, drop_remainder=True, num_parallel_calls=calls)
                .prefetch(tf.data.AUTOTUNE))
    if workload.settings.prefetch_to_device:
        # TF 2.15: copy_to_device onto the GPU, then a prefetch buffer there; it must be the pipeline's last step.
        pipeline = pipeline.apply(tf.data.experimental.prefetch_to_device(_gpu(tf)))
    return iter(pipeline)


def images(tf: Any, workload: Workload, rank: int, size: int) -> Iterator[tuple[Any, Any]]:
    """PNG files listed in the labels CSV; each rank reads its own shard of the list."""
    entries = dataset.read_labels(Path(workload.data_dir or "."))
    if len(entries) < size:
        raise ValueError(f"{workload.data_dir}: {len(entries)} images cannot be sharded over {size} ranks")
    paths = tf.constant([path for path, _ in entries])
    labels = tf.constant([vector for _, vector in entries], dtype=tf.float32)
    records = tf.data.Dataset.from_tensor_slices((paths, labels)).shard(size, rank)
    return _finish(tf, records, lambda path, y: (tf.io.read_file(path), y), workload, rank, size,
                   [Path(workload.data_dir or ".") / dataset.LABELS_CSV])


def tfrecords(tf: Any, workload: Workload, rank: int, size: int) -> Iterator[tuple[Any, Any]]:
    """TFRecord shards written by `benchrunner dataset --tfrecord-shards`; files are split between ranks."""
    paths = sorted((Path(workload.data_dir or ".") / TFRECORD_DIR).glob("*.tfrecord"))
    files = [str(p) for p in paths]
    if len(files) < size:
        raise ValueError(f"{workload.data_dir}/{TFRECORD_DIR}: {len(files)} shard files cannot be split over "
                         f"{size} ranks; write at least {size} shards")
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/findings": tf.io.FixedLenFeature([len(dataset.FINDINGS)], tf.float32)}

    def parse(record: Any) -> tuple[Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        return example["image/encoded"], example["image/findings"]

    # cycle_length None leaves it to tf.data (from the CPUs, TF 2.15's interleave), which "autotune" stands for.
    cycle = None if workload.settings.interleave_cycle_length == AUTOTUNE else workload.settings.interleave_cycle_length
    records = (tf.data.Dataset.from_tensor_slices(files).shard(size, rank)
               .interleave(tf.data.TFRecordDataset, cycle_length=cycle,
                           num_parallel_calls=parallelism(tf, workload.settings.num_parallel_calls)))
    return _finish(tf, records, parse, workload, rank, size, paths)


def batches(tf: Any, workload: Workload, rank: int, size: int) -> Iterator[tuple[Any, Any]]:
    if workload.data == "synthetic":
        return synthetic(tf, workload, rank)
    if workload.data == "images":
        return images(tf, workload, rank, size)
    return tfrecords(tf, workload, rank, size)


def write_tfrecords(tf: Any, directory: Path, shards: int) -> list[Path]:
    """Convert the PNG dataset in `directory` into `shards` TFRecord files under tfrecord/."""
    entries = dataset.read_labels(directory)
    out = directory / TFRECORD_DIR
    out.mkdir(exist_ok=True)
    paths = []
    for shard in range(shards):
        path = out / f"train-{shard:05d}-of-{shards:05d}.tfrecord"
        tmp = path.with_suffix(".partial")
        with tf.io.TFRecordWriter(str(tmp)) as writer:
            for image_path, findings in entries[shard::shards]:
                feature = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[Path(image_path).read_bytes()])),
                    "image/findings": tf.train.Feature(float_list=tf.train.FloatList(value=findings)),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        tmp.replace(path)
        paths.append(path)
    return paths
