"""The torch models: benchrunner's own definitions have the published architectures' parameter counts and run at
the smallest image each model accepts."""

from __future__ import annotations

import pytest
import torch

from benchrunner.frameworks._torch import cnn as torch_cnn
from benchrunner.frameworks._torch.models import parameter_count, parameter_count_on_meta
from benchrunner.models import cnn as keras_models

# The published counts at 1000 classes: ResNet-50 (v1.5, no conv biases), VGG-16 (configuration D),
# DenseNet-121, and Inception-v3 without its auxiliary classifier.
PARAMETERS_AT_1000 = {"resnet50": 25_557_032, "vgg16": 138_357_544, "densenet121_chexnet": 7_978_856,
                      "inception_v3": 23_834_568}


def test_every_model_of_the_tensorflow_path_has_a_torch_definition():
    assert set(torch_cnn.OWN) == set(keras_models.MODELS)
    assert set(torch_cnn.TORCHVISION) == set(keras_models.MODELS) - {"small_cnn"}


@pytest.mark.parametrize("name", sorted(PARAMETERS_AT_1000))
def test_own_definitions_have_the_published_parameter_counts(name):
    assert parameter_count(torch_cnn.OWN[name](224, 1000)) == PARAMETERS_AT_1000[name]


def test_chexnet_is_densenet_121_features_and_one_output_per_finding():
    chexnet = torch_cnn.OWN["densenet121_chexnet"](224, keras_models.CHEXNET_FINDINGS)
    classifier = list(chexnet.children())[-1]
    assert isinstance(classifier, torch.nn.Linear) and (classifier.in_features, classifier.out_features) == (1024, 14)
    assert parameter_count(chexnet) == PARAMETERS_AT_1000["densenet121_chexnet"] - 1024 * (1000 - 14) - (1000 - 14)


def test_small_cnn_has_the_keras_models_layers():
    # Keras: two 'same' 3x3 convolutions (32, 64) each pooled 2x2, dense 128, dense classes.
    size, classes = 32, 10
    expected = (3 * 3 * 3 * 32 + 32) + (3 * 3 * 32 * 64 + 64) + (64 * (size // 4) ** 2 * 128 + 128) + (128 * classes + classes)
    assert parameter_count(torch_cnn.OWN["small_cnn"](size, classes)) == expected


@pytest.mark.parametrize("name", sorted(keras_models.MODELS))
def test_each_model_runs_a_forward_at_its_smallest_image(name):
    size = torch_cnn.MIN_IMAGE_SIZE[name]
    model = torch_cnn.OWN[name](size, 5).eval()
    with torch.no_grad():
        assert model(torch.rand(2, 3, size, size)).shape == (2, 5)


def test_build_names_its_source_and_refuses_unknown_models():
    model, source = torch_cnn.build("small_cnn", 16, 3)
    assert source == "benchrunner" and model(torch.rand(1, 3, 16, 16)).shape == (1, 3)
    try:
        import torchvision  # noqa: F401, PLC0415 - whether this Python has it decides the expected source
    except ImportError:
        expected = "benchrunner"
    else:
        expected = "torchvision"
    assert torch_cnn.build("resnet50", 32, 3)[1] == expected
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        torch_cnn.build("alexnet", 32, 3)


@pytest.mark.parametrize("name", sorted(name for name, spec in keras_models.MODELS.items() if spec.published_parameters))
def test_the_catalogue_s_published_counts_are_those_of_the_own_definitions_at_their_input(name):
    spec = keras_models.MODELS[name]
    assert "1000 classes" in spec.published_source
    assert parameter_count(torch_cnn.OWN[name](*keras_models.catalogue_input(name))) == spec.published_parameters
    assert parameter_count_on_meta(name) == spec.published_parameters
