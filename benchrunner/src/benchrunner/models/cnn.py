"""The image classifiers the founding studies trained: what each is, whichever framework builds it."""

from __future__ import annotations

from benchrunner.models import ModelSpec

NAME = "cnn"
# CheXNet predicts 14 findings independently (multi-label), hence sigmoid outputs.
CHEXNET_FINDINGS = 14
# Multi-label models train on independent binary targets; the rest on one class per image.
MULTI_LABEL = {"densenet121_chexnet"}
# The smallest image each model accepts: Keras's applications refuse smaller ones (obtain_input_shape's min_size
# in keras 2.15: 32 for ResNet50, VGG16 and DenseNet121, 75 for InceptionV3); the small CNN halves twice.
MIN_IMAGE_SIZE = {"small_cnn": 8, "resnet50": 32, "inception_v3": 75, "vgg16": 32, "densenet121_chexnet": 32}

MODELS = {name: ModelSpec(name, "image") for name in MIN_IMAGE_SIZE}
