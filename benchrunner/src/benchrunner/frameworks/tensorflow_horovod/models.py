"""The image models in Keras, built without pretrained weights (nothing is downloaded)."""

from __future__ import annotations

from typing import Any, Callable


def _small_cnn(tf: Any, shape: tuple[int, int, int], classes: int) -> Any:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Input(shape=shape),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(classes),
    ], name="small_cnn")


def _application(name: str) -> Callable[[Any, tuple[int, int, int], int], Any]:
    def build(tf: Any, shape: tuple[int, int, int], classes: int) -> Any:
        constructor = getattr(tf.keras.applications, name)
        return constructor(weights=None, input_shape=shape, classes=classes, classifier_activation=None)
    return build


def _densenet121_chexnet(tf: Any, shape: tuple[int, int, int], classes: int) -> Any:
    base = tf.keras.applications.DenseNet121(weights=None, include_top=False, input_shape=shape, pooling="avg")
    outputs = tf.keras.layers.Dense(classes, name="findings")(base.output)
    return tf.keras.Model(base.input, outputs, name="densenet121_chexnet")


BUILDERS: dict[str, Callable[[Any, tuple[int, int, int], int], Any]] = {
    "small_cnn": _small_cnn,
    "resnet50": _application("ResNet50"),
    "inception_v3": _application("InceptionV3"),
    "vgg16": _application("VGG16"),
    "densenet121_chexnet": _densenet121_chexnet,
}


def build(tf: Any, name: str, image_size: int, classes: int) -> Any:
    try:
        constructor = BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(BUILDERS))}") from None
    return constructor(tf, (image_size, image_size, 3), classes)
