"""The image models (benchrunner.models.cnn) in torch, without pretrained weights: the architectures TensorFlow builds
in Keras.

torchvision's constructors where torchvision is installed, else benchrunner's own definitions of the same
architectures (the layer configurations of the papers, as torchvision lays them out, so either source trains the
same network and has the same parameter count). The result records which source built the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchrunner.models.cnn import MIN_IMAGE_SIZE, MODELS, catalogue_input
from benchrunner.workload import Workload

__all__ = ["MIN_IMAGE_SIZE", "OWN", "build", "for_catalogue", "for_workload"]


def small_cnn(image_size: int, classes: int) -> nn.Module:
    """The Keras small_cnn layer for layer: 'same' 3x3 convolutions, 2x2 pooling that rounds down."""
    side = image_size // 4
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * side * side, 128), nn.ReLU(inplace=True), nn.Linear(128, classes),
    )


def conv_bn(inputs: int, outputs: int, kernel: int | tuple[int, int], stride: int = 1,
            padding: int | tuple[int, int] = 0, eps: float = 1e-5, relu: bool = True) -> nn.Sequential:
    """Convolution without bias (the batch norm after it has one), batch norm, and usually ReLU."""
    layers: list[nn.Module] = [nn.Conv2d(inputs, outputs, kernel, stride, padding, bias=False),
                               nn.BatchNorm2d(outputs, eps=eps)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class Concat(nn.Module):
    """Branches applied to the same input, their outputs concatenated along channels (Inception's modules)."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


class Bottleneck(nn.Module):
    """ResNet-50's block: 1x1 down to `width`, 3x3 (which strides, as ResNet v1.5), 1x1 up to 4 x width, plus the
    shortcut (projected where the shape changes)."""

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        outputs = 4 * width
        self.residual = nn.Sequential(conv_bn(inputs, width, 1), conv_bn(width, width, 3, stride, 1),
                                      conv_bn(width, outputs, 1, relu=False))
        self.shortcut = (conv_bn(inputs, outputs, 1, stride, relu=False) if stride != 1 or inputs != outputs
                         else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.residual(x) + self.shortcut(x))


def resnet50(classes: int) -> nn.Module:
    layers: list[nn.Module] = [conv_bn(3, 64, 7, 2, 3), nn.MaxPool2d(3, 2, 1)]
    inputs = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            layers.append(Bottleneck(inputs, width, stride if block == 0 else 1))
            inputs = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inputs, classes))


# VGG-16 (configuration D): output channels of each 3x3 convolution, "M" a 2x2 max pool.
VGG16_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(classes: int) -> nn.Module:
    layers: list[nn.Module] = []
    inputs = 3
    for layer in VGG16_LAYERS:
        if layer == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(inputs, int(layer), 3, padding=1), nn.ReLU(inplace=True)]
            inputs = int(layer)
    # Pooled to 7x7 whatever the image size, so the classifier (and the parameter count) is the 224 px one's.
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(7), nn.Flatten(),
                         nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                         nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                         nn.Linear(4096, classes))


class DenseLayer(nn.Module):
    """DenseNet's pre-activation bottleneck (BN, ReLU, 1x1 to 4 x growth, BN, ReLU, 3x3 to growth), its output
    appended to its input."""

    def __init__(self, inputs: int, growth: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(inputs), nn.ReLU(inplace=True),
                                  nn.Conv2d(inputs, 4 * growth, 1, bias=False),
                                  nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True),
                                  nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


def densenet121(classes: int, growth: int = 32) -> nn.Module:
    """DenseNet-121's features and a linear layer: for CheXNet, one output per finding."""
    layers: list[nn.Module] = [conv_bn(3, 64, 7, 2, 3), nn.MaxPool2d(3, 2, 1)]
    channels = 64
    blocks = (6, 12, 24, 16)
    for index, count in enumerate(blocks):
        for _ in range(count):
            layers.append(DenseLayer(channels, growth))
            channels += growth
        if index < len(blocks) - 1:
            # Transition: halve the channels (compression 0.5) and the resolution.
            layers += [nn.BatchNorm2d(channels), nn.ReLU(inplace=True), nn.Conv2d(channels, channels // 2, 1, bias=False),
                       nn.AvgPool2d(2)]
            channels //= 2
    return nn.Sequential(*layers, nn.BatchNorm2d(channels), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(channels, classes))


def _inception_conv(inputs: int, outputs: int, kernel: int | tuple[int, int], stride: int = 1,
                    padding: int | tuple[int, int] = 0) -> nn.Sequential:
    # Inception-v3's batch norms use epsilon 0.001.
    return conv_bn(inputs, outputs, kernel, stride, padding, eps=1e-3)


def _pool_branch(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, 1, 1), _inception_conv(inputs, outputs, 1))


def _inception_a(inputs: int, pool: int) -> Concat:
    c = _inception_conv
    return Concat(c(inputs, 64, 1),
                  nn.Sequential(c(inputs, 48, 1), c(48, 64, 5, padding=2)),
                  nn.Sequential(c(inputs, 64, 1), c(64, 96, 3, padding=1), c(96, 96, 3, padding=1)),
                  _pool_branch(inputs, pool))


def _inception_b(inputs: int) -> Concat:
    c = _inception_conv
    return Concat(c(inputs, 384, 3, 2),
                  nn.Sequential(c(inputs, 64, 1), c(64, 96, 3, padding=1), c(96, 96, 3, 2)),
                  nn.MaxPool2d(3, 2))


def _inception_c(inputs: int, width: int) -> Concat:
    """Factorised 7x7: a 1x7 and a 7x1 convolution in place of each 7x7."""
    c = _inception_conv

    def row(i: int, o: int) -> nn.Sequential:
        return c(i, o, (1, 7), padding=(0, 3))

    def column(i: int, o: int) -> nn.Sequential:
        return c(i, o, (7, 1), padding=(3, 0))

    return Concat(c(inputs, 192, 1),
                  nn.Sequential(c(inputs, width, 1), row(width, width), column(width, 192)),
                  nn.Sequential(c(inputs, width, 1), column(width, width), row(width, width), column(width, width),
                                row(width, 192)),
                  _pool_branch(inputs, 192))


def _inception_d(inputs: int) -> Concat:
    c = _inception_conv
    return Concat(nn.Sequential(c(inputs, 192, 1), c(192, 320, 3, 2)),
                  nn.Sequential(c(inputs, 192, 1), c(192, 192, (1, 7), padding=(0, 3)),
                                c(192, 192, (7, 1), padding=(3, 0)), c(192, 192, 3, 2)),
                  nn.MaxPool2d(3, 2))


def _inception_e(inputs: int) -> Concat:
    """The widest module: its 3x3 branches end in a 1x3 and a 3x1 side by side."""
    c = _inception_conv

    def split() -> Concat:
        return Concat(c(384, 384, (1, 3), padding=(0, 1)), c(384, 384, (3, 1), padding=(1, 0)))

    return Concat(c(inputs, 320, 1),
                  nn.Sequential(c(inputs, 384, 1), split()),
                  nn.Sequential(c(inputs, 448, 1), c(448, 384, 3, padding=1), split()),
                  _pool_branch(inputs, 192))


def inception_v3(classes: int) -> nn.Module:
    """Inception-v3 without its auxiliary classifier (Keras's InceptionV3 has none either)."""
    c = _inception_conv
    return nn.Sequential(
        c(3, 32, 3, 2), c(32, 32, 3), c(32, 64, 3, padding=1), nn.MaxPool2d(3, 2),
        c(64, 80, 1), c(80, 192, 3), nn.MaxPool2d(3, 2),
        _inception_a(192, 32), _inception_a(256, 64), _inception_a(288, 64),
        _inception_b(288),
        _inception_c(768, 128), _inception_c(768, 160), _inception_c(768, 160), _inception_c(768, 192),
        _inception_d(768),
        _inception_e(1280), _inception_e(2048),
        nn.AdaptiveAvgPool2d(1), nn.Dropout(), nn.Flatten(), nn.Linear(2048, classes),
    )


# (image size, classes) -> model, for every model benchrunner.models.cnn names.
OWN: dict[str, Callable[[int, int], nn.Module]] = {
    "small_cnn": small_cnn,
    "resnet50": lambda image_size, classes: resnet50(classes),
    "inception_v3": lambda image_size, classes: inception_v3(classes),
    "vgg16": lambda image_size, classes: vgg16(classes),
    "densenet121_chexnet": lambda image_size, classes: densenet121(classes),
}

# torchvision's constructors of the same (small_cnn is benchrunner's alone).
TORCHVISION: dict[str, Callable[[Any, int], nn.Module]] = {
    "resnet50": lambda tv, classes: tv.models.resnet50(weights=None, num_classes=classes),
    "inception_v3": lambda tv, classes: tv.models.inception_v3(weights=None, aux_logits=False, init_weights=True,
                                                                num_classes=classes),
    "vgg16": lambda tv, classes: tv.models.vgg16(weights=None, num_classes=classes),
    "densenet121_chexnet": lambda tv, classes: tv.models.densenet121(weights=None, num_classes=classes),
}


def build(name: str, image_size: int, classes: int) -> tuple[nn.Module, str]:
    """(the model, "torchvision" or "benchrunner": which definition built it)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}")
    if name in TORCHVISION:
        try:
            import torchvision  # noqa: PLC0415 - optional: ranks without it build benchrunner's definitions
        except ImportError:
            pass
        else:
            return TORCHVISION[name](torchvision, classes), "torchvision"
    return OWN[name](image_size, classes), "benchrunner"


def for_workload(workload: Workload, device: torch.device) -> tuple[nn.Module, str]:
    """The workload's model at its image size and classes, built on the CPU then moved to the device."""
    module, source = build(workload.model, workload.image_size, workload.classes)
    return module.to(device), source


def for_catalogue(name: str) -> nn.Module:
    """The model at the input its catalogue count is for (benchrunner.models.cnn.catalogue_input)."""
    return build(name, *catalogue_input(name))[0]
