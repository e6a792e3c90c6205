"""The image classifiers the founding studies trained: what each is, whichever framework builds it."""

from __future__ import annotations

from benchrunner.models import ModelSpec

NAME = "cnn"
TORCH_BUILDER = "benchrunner.frameworks._torch.cnn"
# CheXNet predicts 14 findings independently (multi-label), hence sigmoid outputs.
CHEXNET_FINDINGS = 14
# Multi-label models train on independent binary targets; the rest on one class per image.
MULTI_LABEL = {"densenet121_chexnet"}
# The smallest image each model accepts: Keras's applications refuse smaller ones (obtain_input_shape's min_size
# in keras 2.15: 32 for ResNet50, VGG16 and DenseNet121, 75 for InceptionV3); the small CNN halves twice.
MIN_IMAGE_SIZE = {"small_cnn": 8, "resnet50": 32, "inception_v3": 75, "vgg16": 32, "densenet121_chexnet": 32}

# ImageNet's classes and the side of its usual crop: what published parameter counts of these models are counted at.
IMAGENET_CLASSES = 1000
IMAGENET_IMAGE_SIZE = 224

# torchvision's docs give each architecture's parameter count with its ImageNet weights, at 1000 classes (the
# num_params of ResNet50_Weights.IMAGENET1K_V1 and VGG16_Weights.IMAGENET1K_V1). Keras's applications table is no
# source for a torch count: it counts batch norms' moving statistics too (ResNet50 25.6M). Inception-v3 has none:
# torchvision's 27,161,264 holds the auxiliary classifier, which benchrunner's model (as Keras's) has not. CheXNet's
# 14 outputs make it DenseNet-121 (torchvision: 7,978,856 at 1000 classes) less 1,010,650, published nowhere.
TORCHVISION_DOCS = "torchvision's docs ({}_Weights.IMAGENET1K_V1 num_params), at 1000 classes"
PUBLISHED = {"resnet50": (25_557_032, TORCHVISION_DOCS.format("ResNet50")),
             "vgg16": (138_357_544, TORCHVISION_DOCS.format("VGG16"))}

MODELS = {name: ModelSpec(name, "image", *PUBLISHED.get(name, (None, None))) for name in MIN_IMAGE_SIZE}


def catalogue_input(name: str) -> tuple[int, int]:
    """(image size, classes) a model's parameters are counted at in the catalogue: ImageNet's, as published counts
    are; CheXNet's findings for the multi-label model, which has no other number of outputs."""
    return IMAGENET_IMAGE_SIZE, CHEXNET_FINDINGS if name in MULTI_LABEL else IMAGENET_CLASSES


def min_image_size(name: str) -> int:
    return MIN_IMAGE_SIZE[name]


def multi_label(name: str) -> bool:
    return name in MULTI_LABEL


def multi_label_classes(name: str) -> int:
    """Multi-label data is ChestX-ray14-style, whichever model trains on it: one output per finding."""
    return CHEXNET_FINDINGS
