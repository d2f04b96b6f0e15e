"""The test set under distribution shift: Gaussian noise, blur, contrast and rotation at two
severities each, made by our own code with torch operations only (after Hendrycks and Dietterich's
ImageNet-C / MNIST-C corruptions, with severities chosen for 28 x 28 grey images in [0, 1]).

Deterministic: the same images, seed and severity give the same bytes; the random parts (noise,
rotation angles) come from a torch.Generator seeded from `seed` and the corruption's name.
"""
import math
import zlib

import torch
import torch.nn.functional as F

SEVERITIES = (1, 2)


def generator(name, severity, seed):
    """Each corruption and severity its own random stream, the same in every run."""
    return torch.Generator().manual_seed(seed * 1000 + zlib.crc32(name.encode()) % 997 * 10 + severity)


def gaussian_noise(images, severity, random):
    """Additive N(0, sigma^2) per pixel, clipped to [0, 1]: sigma 0.2, then 0.4."""
    sigma = (0.2, 0.4)[severity - 1]
    return (images + sigma * torch.randn(images.shape, generator=random)).clamp(0, 1)


def blur(images, severity, random):
    """A Gaussian blur (separable, zero-padded): sigma 1 pixel, then 1.5."""
    sigma = (1.0, 1.5)[severity - 1]
    radius = math.ceil(3 * sigma)
    offsets = torch.arange(-radius, radius + 1, dtype=images.dtype)
    kernel = torch.exp(-offsets ** 2 / (2 * sigma ** 2))
    kernel = kernel / kernel.sum()
    rows = F.conv2d(images, kernel.reshape(1, 1, -1, 1), padding=(radius, 0))
    return F.conv2d(rows, kernel.reshape(1, 1, 1, -1), padding=(0, radius))


def contrast(images, severity, random):
    """Each image pulled towards its own mean brightness: 30%, then 15% of its contrast kept."""
    kept = (0.3, 0.15)[severity - 1]
    means = images.mean(dim=(1, 2, 3), keepdim=True)
    return (images - means) * kept + means


def rotation(images, severity, random):
    """Each image rotated about its centre by an angle drawn uniformly in +-[15, 30] degrees,
    then +-[40, 60] (random sign), bilinear, black outside the image.

    Sampled with our own bilinear gather: the shim refuses aten::affine_grid_generator, which
    F.affine_grid needs."""
    low, high = ((15, 30), (40, 60))[severity - 1]
    count = len(images)
    magnitudes = low + (high - low) * torch.rand(count, generator=random)
    signs = torch.randint(0, 2, (count,), generator=random) * 2 - 1
    angles = (magnitudes * signs) * (math.pi / 180)
    return bilinear_rotate(images, angles)


def bilinear_rotate(images, angles):
    """images (N x C x H x W) each rotated by its angle (radians, counter-clockwise) about its centre."""
    count, channels, height, width = images.shape
    ys, xs = torch.meshgrid(torch.arange(height, dtype=images.dtype), torch.arange(width, dtype=images.dtype),
                            indexing="ij")
    centre_y, centre_x = (height - 1) / 2, (width - 1) / 2
    cos, sin = angles.cos().reshape(-1, 1, 1), angles.sin().reshape(-1, 1, 1)
    # Each output pixel reads the input at the inverse rotation of its position.
    source_x = cos * (xs - centre_x) - sin * (ys - centre_y) + centre_x
    source_y = sin * (xs - centre_x) + cos * (ys - centre_y) + centre_y
    x0, y0 = source_x.floor(), source_y.floor()
    flat = images.reshape(count, channels, height * width)
    rotated = torch.zeros_like(flat)
    for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
        corner_x, corner_y = x0 + dx, y0 + dy
        weight = (1 - (source_x - corner_x).abs()) * (1 - (source_y - corner_y).abs())
        inside = (corner_x >= 0) & (corner_x < width) & (corner_y >= 0) & (corner_y < height)
        index = (corner_y.clamp(0, height - 1) * width + corner_x.clamp(0, width - 1)).long().reshape(count, 1, -1)
        values = flat.gather(2, index.expand(count, channels, -1))
        rotated = rotated + values * (weight * inside).reshape(count, 1, -1)
    return rotated.reshape(images.shape)


CORRUPTIONS = {"gaussian_noise": gaussian_noise, "blur": blur, "contrast": contrast, "rotation": rotation}


def corrupt(images, name, severity, seed):
    """images (N x 1 x 28 x 28 in [0, 1]) under corruption `name` at severity 1 or 2."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity {severity}: the demo's corruptions have severities {SEVERITIES}")
    return CORRUPTIONS[name](images, severity, generator(name, severity, seed)).contiguous()
