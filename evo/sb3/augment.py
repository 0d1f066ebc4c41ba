"""DrAC's image augmentations (Raileanu et al., 2021; as in the Procgen AutoRL paper's code,
jparkerholder/procgen_autorl ``auto_drac/data_augs.py``), batched in torch.

Each augmentation takes a batch of frames ``(N, C, H, W)`` (channels first, as SB3's rollout buffer
holds Procgen's 64x64x3 observations) with values in [0, 255], in uint8 or a float dtype, and a
``torch.Generator``; it returns a new batch of the same shape, dtype and range, each frame with its
own random draw. DrAC's regulariser in PPO's update (evo/sb3/ppo.py) augments each minibatch's
frames with one of them, by name.

- ``crop``: pad 12 pixels by replication, then a random 64x64 (the frame's size) window;
- ``random-conv``: a random 3x3 convolution per frame (Xavier-normal weights), clamped to the range;
- ``grayscale``: the ITU-R 601 luma (0.299 R + 0.587 G + 0.114 B) in every channel;
- ``flip``: each frame upside down with probability 0.5 (the paper's ``np.flip`` on axis 2 of NCHW:
  the rows);
- ``rotate``: each frame by 0, 90, 180 or 270 degrees (square frames);
- ``cutout``: a box of side 7..21 (a draw per frame for its height and its width) set to black, at
  the paper's place (rows ``12 + h .. 12 + 2h``, columns ``24 + w .. 24 + 2w``);
- ``cutout-color``: the same box in a random colour;
- ``color-jitter``: brightness, contrast (around each channel's mean) and saturation scaled by
  factors in [0.6, 1.4], the hue shifted by a factor in [-0.5, 0.5] times 255/360 of a turn (the
  paper's code), the contrast step before or after the HSV steps at random, as the paper's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

PAD = 12
BOX = (7, 22)  # a cutout's side: 7 .. 21
PIVOT = (12, 24)  # where a cutout's box starts, before its own side is added (rows, columns)
JITTER = 0.4  # brightness, contrast, saturation: factors in [1 - JITTER, 1 + JITTER]
HUE = 0.5  # hue factor in [-HUE, HUE] ...
HUE_SCALE = 255.0 / 360.0  # ... times this, in turns (the paper's code: up to 0.35 of a turn)
LUMA = (0.299, 0.587, 0.114)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x.float() / 255.0


def _back(y: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A float batch in [0, 1] back to ``like``'s range [0, 255] and dtype."""
    y = (y.clamp(0.0, 1.0) * 255.0).to(torch.float32)
    return y.round().to(like.dtype) if not like.dtype.is_floating_point else y.to(like.dtype)


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return torch.rand(n, generator=generator) * (high - low) + low


def crop(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    n, _, h, w = x.shape
    padded = F.pad(x.float(), (PAD, PAD, PAD, PAD), mode="replicate")
    top = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
    left = torch.randint(0, 2 * PAD + 1, (n,), generator=generator)
    rows = (top[:, None] + torch.arange(h)[None, :])[:, None, :, None]  # (n, 1, h, 1)
    cols = (left[:, None] + torch.arange(w)[None, :])[:, None, None, :]  # (n, 1, 1, w)
    batch = torch.arange(n)[:, None, None, None]
    channels = torch.arange(x.shape[1])[None, :, None, None]
    return padded[batch, channels, rows, cols].to(x.dtype)


def random_conv(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    n, c, h, w = x.shape
    std = (2.0 / (c * 9 + c * 9)) ** 0.5  # Xavier normal for a c -> c 3x3 kernel
    weight = torch.randn((n * c, c, 3, 3), generator=generator) * std
    out = F.conv2d(_unit(x).reshape(1, n * c, h, w), weight, padding=1, groups=n)
    return _back(out.reshape(n, c, h, w), x)


def grayscale(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    luma = torch.tensor(LUMA).view(1, 3, 1, 1)
    gray = (_unit(x) * luma).sum(dim=1, keepdim=True)
    return _back(gray.expand_as(x), x)


def flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    chosen = torch.rand(x.shape[0], generator=generator) < 0.5
    out = x.clone()
    out[chosen] = x[chosen].flip(2)
    return out


def rotate(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    turns = torch.randint(0, 4, (x.shape[0],), generator=generator)
    out = x.clone()
    for k in range(1, 4):
        chosen = turns == k
        if chosen.any():
            out[chosen] = torch.rot90(x[chosen], k, dims=(2, 3))
    return out


def _boxes(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each frame's cutout box as a mask (n, 1, h, w)."""
    n, _, h, w = x.shape
    side_h = torch.randint(*BOX, (n,), generator=generator)
    side_w = torch.randint(*BOX, (n,), generator=generator)
    rows, cols = torch.arange(h)[None, :], torch.arange(w)[None, :]
    top, left = PIVOT[0] + side_h[:, None], PIVOT[1] + side_w[:, None]
    in_rows = (rows >= top) & (rows < top + side_h[:, None])
    in_cols = (cols >= left) & (cols < left + side_w[:, None])
    return (in_rows[:, :, None] & in_cols[:, None, :])[:, None]


def cutout(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return x.masked_fill(_boxes(x, generator), 0)


def cutout_color(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    box = _boxes(x, generator)
    colour = torch.randint(0, 256, (x.shape[0], x.shape[1], 1, 1), generator=generator).to(x.dtype)
    return torch.where(box, colour, x)


def rgb_to_hsv(rgb: torch.Tensor) -> torch.Tensor:
    """(n, 3, h, w) in [0, 1] to hue (in turns), saturation, value."""
    r, g, b = rgb.unbind(1)
    high, _ = rgb.max(1)
    low, _ = rgb.min(1)
    delta = high - low
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    hue = torch.where(high == r, ((g - b) / safe) % 6, torch.where(high == g, (b - r) / safe + 2, (r - g) / safe + 4))
    hue = torch.where(delta > 0, hue / 6.0, torch.zeros_like(hue))
    saturation = torch.where(
        high > 0, delta / torch.where(high > 0, high, torch.ones_like(high)), torch.zeros_like(high)
    )
    return torch.stack((hue, saturation, high), 1)


def hsv_to_rgb(hsv: torch.Tensor) -> torch.Tensor:
    hue, saturation, value = hsv.unbind(1)
    k = lambda n: (n + hue * 6.0) % 6  # noqa: E731
    channel = lambda n: value - value * saturation * torch.clamp(torch.minimum(k(n), 4 - k(n)), 0, 1)  # noqa: E731
    return torch.stack((channel(5), channel(3), channel(1)), 1)


def color_jitter(x: torch.Tensor, generator: torch.Generator, strength: float = 1.0) -> torch.Tensor:
    """``strength`` scales the factors' spread (0: every factor 1 and no hue shift, the identity)."""
    n = x.shape[0]
    spread = JITTER * strength
    brightness, contrast, saturation = (_uniform(n, 1 - spread, 1 + spread, generator).view(n, 1, 1) for _ in range(3))
    hue_shift = _uniform(n, -HUE * strength, HUE * strength, generator).view(n, 1, 1)
    contrast_first = torch.rand(n, generator=generator) < 0.5

    def adjust_contrast(rgb: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        mean = rgb.mean(dim=(2, 3), keepdim=True)  # each channel's, as the paper's
        return ((rgb - mean) * contrast[rows].unsqueeze(1) + mean).clamp(0, 1)

    def adjust_hsv(rgb: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        hue, sat, value = rgb_to_hsv(rgb).unbind(1)
        hue = (hue + hue_shift[rows] * HUE_SCALE) % 1.0
        return hsv_to_rgb(
            torch.stack((hue, (sat * saturation[rows]).clamp(0, 1), (value * brightness[rows]).clamp(0, 1)), 1)
        )

    rgb = _unit(x)
    out = torch.empty_like(rgb)
    first, second = contrast_first.nonzero().flatten(), (~contrast_first).nonzero().flatten()
    out[first] = adjust_hsv(adjust_contrast(rgb[first], first), first)
    out[second] = adjust_contrast(adjust_hsv(rgb[second], second), second)
    return _back(out, x)


Augmentation = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
"""``augmentation(frames, generator)``: a new batch of frames (the module docstring)."""

AUGMENTATIONS: dict[str, Augmentation] = {
    "crop": crop,
    "random-conv": random_conv,
    "grayscale": grayscale,
    "flip": flip,
    "rotate": rotate,
    "cutout": cutout,
    "cutout-color": cutout_color,
    "color-jitter": color_jitter,
}
"""DrAC's augmentations by the paper's names (its eight); PPO's declaration lists the same names."""
