"""Input for training: synthetic tensors, or a tf.data pipeline over a ChestX-ray14-style dataset."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchrunner import dataset
from benchrunner.workload import Workload

TFRECORD_DIR = "tfrecord"


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


def _decode(tf: Any, workload: Workload, encoded: Any, labels: Any, training_seed: int) -> tuple[Any, Any]:
    image = tf.io.decode_png(encoded, channels=3)
    image = tf.image.resize(image, [workload.image_size, workload.image_size])
    # Light augmentation, as CheXNet trained with random horizontal flips.
    image = tf.image.random_flip_left_right(image, seed=training_seed)
    return image / 255.0, labels


def _finish(tf: Any, records: Any, workload: Workload, rank: int) -> Iterator[tuple[Any, Any]]:
    autotune = tf.data.AUTOTUNE
    pipeline = (records.shuffle(1024, seed=rank, reshuffle_each_iteration=True).repeat()
                .batch(workload.batch_size, drop_remainder=True, num_parallel_calls=autotune)
                .prefetch(autotune))
    return iter(pipeline)


def images(tf: Any, workload: Workload, rank: int, size: int) -> Iterator[tuple[Any, Any]]:
    """PNG files listed in the labels CSV; each rank reads its own shard of the list."""
    entries = dataset.read_labels(Path(workload.data_dir or "."))
    if len(entries) < size:
        raise ValueError(f"{workload.data_dir}: {len(entries)} images cannot be sharded over {size} ranks")
    paths = tf.constant([path for path, _ in entries])
    labels = tf.constant([vector for _, vector in entries], dtype=tf.float32)
    records = (tf.data.Dataset.from_tensor_slices((paths, labels)).shard(size, rank)
               .map(lambda p, y: _decode(tf, workload, tf.io.read_file(p), y, rank),
                    num_parallel_calls=tf.data.AUTOTUNE))
    return _finish(tf, records, workload, rank)


def tfrecords(tf: Any, workload: Workload, rank: int, size: int) -> Iterator[tuple[Any, Any]]:
    """TFRecord shards written by `benchrunner dataset --tfrecord-shards`; files are split between ranks."""
    files = sorted(str(p) for p in (Path(workload.data_dir or ".") / TFRECORD_DIR).glob("*.tfrecord"))
    if len(files) < size:
        raise ValueError(f"{workload.data_dir}/{TFRECORD_DIR}: {len(files)} shard files cannot be split over "
                         f"{size} ranks; write at least {size} shards")
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/findings": tf.io.FixedLenFeature([len(dataset.FINDINGS)], tf.float32)}

    def parse(record: Any) -> tuple[Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        return _decode(tf, workload, example["image/encoded"], example["image/findings"], rank)

    records = (tf.data.Dataset.from_tensor_slices(files).shard(size, rank)
               .interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
               .map(parse, num_parallel_calls=tf.data.AUTOTUNE))
    return _finish(tf, records, workload, rank)


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
