"""DrAC's augmentations (evo/sb3/augment.py) on batches of 64x64x3 frames: each keeps the shape,
dtype and range, draws per frame, and has the property that defines it."""

import pytest
import torch

from evo.sb3 import augment
from evo.sb3.augment import AUGMENTATIONS

N = 16


def frames(dtype=torch.uint8, seed=0) -> torch.Tensor:
    """Frames with structure (a gradient plus noise), channels first, values in [0, 255]."""
    g = torch.Generator().manual_seed(seed)
    ramp = torch.linspace(0, 200, 64).view(1, 1, 1, 64) + torch.linspace(0, 50, 64).view(1, 1, 64, 1)
    noisy = ramp + torch.randint(0, 6, (N, 3, 64, 64), generator=g)
    noisy[:, 1] = 255 - noisy[:, 1]
    return noisy.clamp(0, 255).to(dtype)


def gen(seed=1) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32], ids=["uint8", "float32"])
@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_shape_dtype_range_and_a_draw_per_frame(name, dtype):
    x = frames(dtype)
    out = AUGMENTATIONS[name](x, gen())
    assert out.shape == x.shape and out.dtype == dtype
    assert float(out.min()) >= 0 and float(out.max()) <= 255
    assert torch.equal(x, frames(dtype))  # the input is not changed
    assert torch.equal(out, AUGMENTATIONS[name](x, gen()))  # the generator decides
    if name != "grayscale":  # every other one draws, and not the same for every frame
        changes = [not torch.equal(out[i] - x[i], out[0] - x[0]) for i in range(1, N)]
        assert any(changes), name


def test_grayscale_has_equal_channels_and_keeps_a_gray_frame():
    out = augment.grayscale(frames(), gen())
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 1], out[:, 2])
    gray = frames()[:, :1].expand(-1, 3, -1, -1).contiguous()
    assert torch.equal(augment.grayscale(gray, gen()), gray)


def test_flip_is_its_own_inverse_and_flips_rows():
    x = frames()
    once = augment.flip(x, gen(3))
    assert torch.equal(augment.flip(once, gen(3)), x)
    flipped = [i for i in range(N) if not torch.equal(once[i], x[i])]
    assert 0 < len(flipped) < N and all(torch.equal(once[i], x[i].flip(1)) for i in flipped)


def test_rotate_turns_each_frame_by_a_quarter_turn_multiple():
    x = frames()
    out = augment.rotate(x, gen())
    turns = [next(k for k in range(4) if torch.equal(out[i], torch.rot90(x[i], k, dims=(1, 2)))) for i in range(N)]
    assert len(set(turns)) > 1


def test_crop_keeps_the_frame_size_and_is_a_window_of_the_padded_frame():
    x = frames()
    out = augment.crop(x, gen())
    padded = torch.nn.functional.pad(x.float(), (12, 12, 12, 12), mode="replicate").to(x.dtype)
    for i in range(N):
        windows = [
            (t, c) for t in range(25) for c in range(25) if torch.equal(padded[i, :, t : t + 64, c : c + 64], out[i])
        ]
        assert windows, f"frame {i} is no 64x64 window of its padded frame"


def test_cutout_fills_one_box_at_the_papers_place():
    """A box of side h x w (7..21 each) at rows 12+h .. 12+2h, columns 24+w .. 24+2w, clipped to the
    frame as the paper's slicing clips it: black, or one colour per frame."""
    x = frames().clamp(1, 254)  # no black or white pixel before
    for name in ("cutout", "cutout-color"):
        out = AUGMENTATIONS[name](x, gen())
        for i in range(N):
            changed = (out[i] != x[i]).any(0)
            top, left = int(changed.any(1).nonzero()[0]), int(changed.any(0).nonzero()[0])
            h, w = top - 12, left - 24
            assert 7 <= h <= 21 and 7 <= w <= 21, (name, i, h, w)
            box = torch.zeros(64, 64, dtype=torch.bool)
            box[top : top + h, left : left + w] = True
            inside = out[i][:, box]
            assert inside.unique(dim=1).shape[1] == 1  # one fill over the box
            assert torch.equal(out[i][:, ~box], x[i][:, ~box])  # nothing outside it changed
            if name == "cutout":
                assert torch.all(inside == 0)


def test_random_conv_with_an_identity_kernel_is_the_identity():
    x = frames()
    weight = torch.zeros(3, 3, 3, 3)
    for c in range(3):
        weight[c, c, 1, 1] = 1.0
    same = torch.nn.functional.conv2d(x.float() / 255, weight, padding=1)
    assert torch.equal(augment._back(same, x), x)


def test_color_jitter_of_strength_0_is_the_identity_and_hsv_round_trips():
    x = frames()
    assert (augment.color_jitter(x, gen(), strength=0.0).int() - x.int()).abs().max() <= 1
    rgb = torch.rand(4, 3, 8, 8, generator=gen())
    assert torch.allclose(augment.hsv_to_rgb(augment.rgb_to_hsv(rgb)), rgb, atol=1e-5)
