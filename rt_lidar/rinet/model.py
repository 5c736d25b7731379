"""RINet's networks: a U-Net generator (RGB -> drop logit + intensity) and a PatchGAN discriminator.

The generator follows pix2pix's U-Net at a size that runs in real time: ``depth`` stride-2 stages of
3x3 convolutions, widths ``base * 2**k`` capped at ``base * 8``, transposed-convolution upsampling with
skip connections. It has two heads: a drop logit and an intensity logit. The exported graph (see
:mod:`rt_lidar.rinet.export`) outputs ``intensity`` (sigmoid), ``drop_prob`` (sigmoid) and ``mask``
(intensity, 0 where ``drop_prob > 0.5``). The input resolution is a setting: any size divisible by
``2**depth``. Parameter and FLOP counts come from :func:`count_params` and :func:`count_flops`.

PyTorch is imported here; import this module only for training and export.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from rt_lidar.schema import Where, check_fields, spec

__all__ = [
    "Discriminator",
    "Generator",
    "ModelConfig",
    "RinetExport",
    "count_flops",
    "count_params",
]


@dataclass(frozen=True)
class ModelConfig:
    """Size and input resolution of the networks."""

    width: int = spec(256, 2, 8192, "px")
    height: int = spec(144, 2, 8192, "px")
    base: int = spec(8, 1, 1024)
    """Channels of the first stage."""
    depth: int = spec(4, 1, 7)
    """Number of stride-2 stages (input sides must be divisible by 2**depth)."""
    disc_base: int = spec(16, 1, 1024)
    disc_layers: int = spec(3, 1, 8)

    def __post_init__(self) -> None:
        check_fields(self, "model")  # --width, --depth ... or a checkpoint's: a ConfigError

    def validate(self, what: Where) -> None:
        """The input sides must be multiples of ``2**depth``."""
        k = 2**self.depth
        for name in ("width", "height"):
            if getattr(self, name) % k:
                raise what.fail(name, f"must be a multiple of 2**depth = {k}, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (stored in checkpoints)."""
        return asdict(self)


def _block(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace=True)
    )


class Generator(nn.Module):
    """U-Net: (N, 3, H, W) RGB in [0, 1] -> (N, 2, H, W) logits (drop, intensity)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        widths = [min(cfg.base * 2**k, cfg.base * 8) for k in range(cfg.depth + 1)]
        self.stem = nn.Sequential(_block(3, widths[0], 1), _block(widths[0], widths[0], 1))
        self.down = nn.ModuleList(
            nn.Sequential(_block(widths[k], widths[k + 1], 2), _block(widths[k + 1], widths[k + 1], 1))
            for k in range(cfg.depth)
        )
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(widths[k + 1], widths[k], 4, 2, 1) for k in reversed(range(cfg.depth))
        )
        self.fuse = nn.ModuleList(_block(2 * widths[k], widths[k], 1) for k in reversed(range(cfg.depth)))
        self.head = nn.Conv2d(widths[0], 2, 1)

    def forward(self, rgb: torch.Tensor) -> torch.Tensor:
        x = self.stem(rgb * 2.0 - 1.0)
        skips = [x]
        for stage in self.down:
            x = stage(x)
            skips.append(x)
        skips.pop()
        for up, fuse in zip(self.up, self.fuse, strict=True):
            x = fuse(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


class Discriminator(nn.Module):
    """PatchGAN: (N, 3 + 2, H, W) RGB + (drop prob, intensity) -> (N, 1, h, w) real/fake logits."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(5, cfg.disc_base, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True)]
        c = cfg.disc_base
        for _ in range(cfg.disc_layers - 1):
            layers += [
                nn.Conv2d(c, 2 * c, 4, 2, 1, bias=False),
                nn.BatchNorm2d(2 * c),
                nn.LeakyReLU(0.2, True),
            ]
            c *= 2
        layers.append(nn.Conv2d(c, 1, 3, 1, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, rgb: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([rgb * 2.0 - 1.0, target * 2.0 - 1.0], dim=1))


class RinetExport(nn.Module):
    """The inference graph: RGB (N, 3, H, W) float32 in [0, 1] -> intensity, drop_prob, mask."""

    def __init__(self, generator: Generator, drop_threshold: float = 0.5) -> None:
        super().__init__()
        self.generator = generator
        self.drop_threshold = float(drop_threshold)

    def forward(self, rgb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.generator(rgb)
        drop = torch.sigmoid(logits[:, 0:1])
        intensity = torch.sigmoid(logits[:, 1:2])
        mask = torch.where(drop > self.drop_threshold, torch.zeros_like(intensity), intensity)
        return intensity, drop, mask


def count_params(module: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def count_flops(module: nn.Module, height: int, width: int) -> int:
    """FLOPs (2 x multiply-accumulates) of one forward pass at ``height`` x ``width`` (conv layers)."""
    total = 0

    def hook(mod: nn.Module, _inp: Any, out: torch.Tensor) -> None:
        nonlocal total
        conv = mod
        assert isinstance(conv, nn.Conv2d | nn.ConvTranspose2d)
        kh, kw = conv.kernel_size
        cin = conv.in_channels // conv.groups
        if isinstance(conv, nn.ConvTranspose2d):  # every input pixel scatters a kernel
            n_in = _inp[0].shape[2] * _inp[0].shape[3]
            total += 2 * n_in * cin * conv.out_channels * kh * kw
        else:
            total += 2 * out.shape[2] * out.shape[3] * conv.out_channels * cin * kh * kw

    handles = [
        m.register_forward_hook(hook)
        for m in module.modules()
        if isinstance(m, nn.Conv2d | nn.ConvTranspose2d)
    ]
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            if isinstance(module, Discriminator):
                module(torch.zeros(1, 3, height, width), torch.zeros(1, 2, height, width))
            else:
                module(torch.zeros(1, 3, height, width))
    finally:
        for h in handles:
            h.remove()
        module.train(was_training)
    return total
