"""ResNet for the GPU benchmark: torchvision's ResNet-50 when torchvision is installed, else a built-in one.

torchvision is an optional benchmark dependency (its wheels are built for one torch and CUDA pair; next to a
CPU-only or newer torch it may not import). The built-in ``resnet50`` is the same network (ResNet v1.5:
bottleneck blocks 3-4-6-3, the stride on the 3x3 convolution, 25,557,032 parameters at 1000 classes,
torchvision's initialisation), so the two measure the same work. ``tiny`` (one block per stage, width 8) is
the CPU smoke test's model.
"""

from __future__ import annotations

from torch import Tensor, nn

#: Model name -> (blocks per stage, width of the first stage).
SHAPES = {"resnet50": ((3, 4, 6, 3), 64), "tiny": ((1, 1, 1, 1), 8)}


class Bottleneck(nn.Module):
    """1x1 down, 3x3 (with the stride), 1x1 up to 4x ``planes``; the shortcut projects when shapes differ."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    """A bottleneck ResNet: 7x7 stem, max pool, four stages (stride 2 from the second), average pool, linear."""

    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, inplanes = [], width
        for i, n in enumerate(blocks):
            planes = width * 2**i
            layers = [Bottleneck(inplanes, planes, 1 if i == 0 else 2)]
            inplanes = planes * Bottleneck.expansion
            layers += [Bottleneck(inplanes, planes) for _ in range(n - 1)]
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def build(name: str, classes: int, source: str = "auto") -> tuple[nn.Module, str]:
    """Model ``name`` (``resnet50`` or ``tiny``) and what ran, e.g. ``"resnet50 (torchvision 0.26.0)"``.

    ``source``: ``auto`` (torchvision's ResNet-50 when it imports, else the built-in one), ``torchvision`` or
    ``builtin``. ``tiny`` is always built in."""
    if name not in SHAPES:
        raise ValueError(f"model must be one of {', '.join(SHAPES)}, got {name!r}")
    if source not in ("auto", "torchvision", "builtin"):
        raise ValueError(f"source must be auto, torchvision or builtin, got {source!r}")
    why = "built in"
    if name == "resnet50" and source != "builtin":
        try:
            import torchvision
            from torchvision.models import resnet50
        except Exception as exc:  # ImportError, or torchvision's C extension failing against this torch
            if source == "torchvision":
                raise
            why = f"built in; torchvision not usable: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        else:
            return resnet50(num_classes=classes), f"resnet50 (torchvision {torchvision.__version__})"
    blocks, width = SHAPES[name]
    return ResNet(blocks, width, classes), f"{name} ({why})"
