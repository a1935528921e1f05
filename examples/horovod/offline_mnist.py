"""MNIST for Horovod's example scripts without a download (the only change to their data loading).

Horovod's examples download MNIST (``tf.keras.datasets.mnist.load_data``, torchvision's ``datasets.MNIST``).
Where that is impossible (no network, no torchvision), these functions stand in with the same shapes and
types: the real MNIST when Keras's cached ``~/.keras/datasets/mnist.npz`` (or ``$HVDKIT_MNIST_NPZ``) exists,
else the 8x8 digits of ``digits.npz`` (beside this file, or ``../data/``)
scaled to 28x28 (1,437 training and 360 test images, so accuracies
are not MNIST's).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def _find_npz() -> Path | None:
    for candidate in (os.environ.get("HVDKIT_MNIST_NPZ"), Path.home() / ".keras" / "datasets" / "mnist.npz"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def load_data(path: str = "mnist.npz") -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``tf.keras.datasets.mnist.load_data`` without a download: ``(x_train, y_train), (x_test, y_test)``,
    uint8 images of 28x28 and uint8 labels. ``path`` is accepted for the same call and not used."""
    npz = _find_npz()
    if npz is not None:
        with np.load(npz) as d:
            return (d["x_train"], d["y_train"]), (d["x_test"], d["y_test"])
    here = Path(__file__).resolve().parent
    digits = next(p for p in (here / "digits.npz", here.parent / "data" / "digits.npz") if p.is_file())
    with np.load(digits) as d:
        x, y = d["x"], d["y"]
    images = np.kron(x.reshape(-1, 8, 8) * (255.0 / 16.0), np.ones((3, 3)))  # 24x24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2))).round().astype(np.uint8)  # 28x28, MNIST's 2-pixel margin
    order = np.random.default_rng(0).permutation(len(images))
    images, y = images[order], y[order].astype(np.uint8)
    split = int(0.8 * len(images))
    return (images[:split], y[:split]), (images[split:], y[split:])


def torch_dataset(train: bool = True):
    """torchvision's ``datasets.MNIST(..., transform=Compose([ToTensor(), Normalize((0.1307,), (0.3081,))]))``
    without a download: a ``TensorDataset`` of normalised ``(1, 28, 28)`` float images and int64 labels."""
    import torch

    (x_train, y_train), (x_test, y_test) = load_data()
    x, y = (x_train, y_train) if train else (x_test, y_test)
    images = (torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1) - 0.1307) / 0.3081
    return torch.utils.data.TensorDataset(images, torch.from_numpy(y.astype(np.int64)))
