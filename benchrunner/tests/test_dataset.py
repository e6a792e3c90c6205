import csv

import pytest
from PIL import Image

from benchrunner import dataset


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return dataset.generate(tmp_path_factory.mktemp("cxr"), dataset.Spec(images=12, image_size=24, seed=3))


def test_png_encoder_writes_what_a_decoder_reads(tmp_path):
    pixels = bytes(range(256)) * 2
    path = tmp_path / "gradient.png"
    path.write_bytes(dataset.png_gray(32, 16, pixels))
    with Image.open(path) as image:
        assert image.mode == "L" and image.size == (32, 16)
        assert image.tobytes() == pixels


def test_dataset_has_the_chestxray14_layout(made):
    with open(made / dataset.LABELS_CSV, newline="") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == dataset.CSV_COLUMNS
    assert len(rows) == 13
    for row in rows[1:]:
        with Image.open(made / dataset.IMAGES_DIR / row[0]) as image:
            assert image.size == (24, 24)
        labels = row[1].split("|")
        assert labels == [dataset.NO_FINDING] or set(labels) <= set(dataset.FINDINGS)


def test_labels_become_multi_hot_vectors_over_the_fourteen_findings(made):
    entries = dataset.read_labels(made)
    assert len(entries) == 12
    assert all(len(vector) == 14 and set(vector) <= {0.0, 1.0} for _, vector in entries)
    assert any(sum(vector) == 0 for _, vector in entries) and any(sum(vector) >= 1 for _, vector in entries)


def test_same_spec_is_not_written_again(made):
    stamp = (made / dataset.LABELS_CSV).stat().st_mtime_ns
    dataset.generate(made, dataset.Spec(images=12, image_size=24, seed=3))
    assert (made / dataset.LABELS_CSV).stat().st_mtime_ns == stamp


def test_unknown_findings_are_refused(tmp_path):
    (tmp_path / dataset.LABELS_CSV).write_text("Image Index,Finding Labels\na.png,Fracture|Mass\n")
    with pytest.raises(ValueError, match=r"unknown findings \['Fracture'\] for a.png"):
        dataset.read_labels(tmp_path)
