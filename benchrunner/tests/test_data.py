"""The input pipeline's pure parts: the cache's file names."""

import os

from benchrunner.frameworks.tensorflow_horovod import data
from benchrunner.workload import Workload


def test_a_file_cache_is_named_after_everything_that_decides_its_contents(tmp_path):
    source = tmp_path / "train-00000-of-00001.tfrecord"
    source.write_bytes(b"records")
    folder = tmp_path / "cache" / "deeper"
    workload = Workload.from_mapping({"data": "tfrecord", "data_dir": str(tmp_path), "cache": str(folder)})
    name = data.cache_file(workload, 1, 4, [source])
    # TensorFlow 2.15 does not make the folder; the rank does.
    assert folder.is_dir() and name.startswith(f"{folder}/benchrunner-") and name.endswith("-rank00001-of-00004")
    assert data.cache_file(workload, 1, 4, [source]) == name
    others = {
        data.cache_file(Workload.from_mapping({"data": "tfrecord", "data_dir": str(tmp_path), "cache": str(folder),
                                               "image_size": 64}), 1, 4,
                        [source]),
        data.cache_file(workload, 2, 4, [source]),
        data.cache_file(workload, 1, 2, [source]),
    }
    os.utime(source, ns=(1, 1))  # the dataset written again
    others.add(data.cache_file(workload, 1, 4, [source]))
    assert name not in others and len(others) == 4
