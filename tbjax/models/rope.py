"""Rotary position embeddings with the scalings Qwen checkpoints use (default, linear, llama3, yarn).

Frequencies are computed once in float64 numpy and rounded to float32, and angles are taken per token from
explicit positions, so packed sequences (positions restarting per document) need nothing special.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from tbjax.models.architecture import RopeConfig


def inverse_frequencies(rope: RopeConfig, head_dim: int) -> tuple[np.ndarray, float]:
    """Returns (inv_freq [head_dim // 2] float32, attention_factor scaling cos and sin)."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    base_freq = (1.0 / (np.float32(rope.theta) ** exponents)).astype(np.float32)
    if rope.kind == "default":
        return base_freq, 1.0
    if rope.kind == "linear":
        return (base_freq / np.float32(rope.factor)).astype(np.float32), 1.0
    if rope.kind == "llama3":
        return _llama3(rope, base_freq), 1.0
    if rope.kind == "yarn":
        return _yarn(rope, head_dim, exponents)
    raise ValueError(f"unknown rope kind {rope.kind!r}")


def _original_length(rope: RopeConfig) -> int:
    """The context length the checkpoint was pre-trained at, which llama3 and yarn scale from."""
    if rope.original_max_position_embeddings is None:
        raise ValueError(f"{rope.kind} rope scaling needs original_max_position_embeddings (or the config's "
                         "max_position_embeddings)")
    return rope.original_max_position_embeddings


def _llama3(rope: RopeConfig, inv_freq: np.ndarray) -> np.ndarray:
    """Long wavelengths are divided by `factor`, short ones kept, the band between interpolated."""
    original = _original_length(rope)
    low_wavelen = original / rope.low_freq_factor
    high_wavelen = original / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (original / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    blended = (1 - smooth) * scaled / rope.factor + smooth * scaled
    in_band = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(in_band, blended, scaled).astype(np.float32)


def _yarn(rope: RopeConfig, head_dim: int, exponents: np.ndarray) -> tuple[np.ndarray, float]:
    """YaRN: interpolate low frequencies, extrapolate high ones, with a linear ramp between, and scale
    attention by `attention_factor` (derived from the factor when the config gives none)."""

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    factor = rope.factor
    attention_factor = rope.attention_factor
    if attention_factor is None:
        if rope.mscale and rope.mscale_all_dim:
            attention_factor = mscale(factor, rope.mscale) / mscale(factor, rope.mscale_all_dim)
        else:
            attention_factor = mscale(factor)

    def correction_dim(rotations: float) -> float:
        original = _original_length(rope)
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(rope.theta))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(head_dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
    extrapolation_weight = (1 - ramp).astype(np.float32)
    pos_freqs = (np.float32(rope.theta) ** exponents).astype(np.float32)
    extrapolated = 1.0 / pos_freqs
    interpolated = 1.0 / (np.float32(factor) * pos_freqs)
    inv_freq = interpolated * (1 - extrapolation_weight) + extrapolated * extrapolation_weight
    return inv_freq.astype(np.float32), float(attention_factor)


class Rotary:
    """Precomputed frequencies for one model; `cos_sin(positions)` gives the per-token tables.
    `rotary_dim` is the rotated share of head_dim (all of it but for partial rotary)."""

    def __init__(self, rope: RopeConfig, rotary_dim: int):
        self.inv_freq, self.attention_factor = inverse_frequencies(rope, rotary_dim)

    def cos_sin(self, positions: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        """positions: [batch, seq] int32 -> (cos, sin): [batch, seq, rotary_dim] float32."""
        angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(self.inv_freq)
        angles = jnp.concatenate([angles, angles], axis=-1)
        return jnp.cos(angles) * self.attention_factor, jnp.sin(angles) * self.attention_factor


def apply_rotary(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
    """x: [batch, seq, heads, head_dim]; cos/sin: [batch, seq, rotary_dim]. Rotates the two halves of the
    leading rotary_dim dims (the HF/Qwen convention); the remaining dims pass through unchanged (partial
    rotary, Qwen3.5)."""
    rotary_dim = cos.shape[-1]
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    half = rotary_dim // 2
    rotated = jnp.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    out = (rot.astype(jnp.float32) * cos + rotated.astype(jnp.float32) * sin).astype(x.dtype)
    return jnp.concatenate([out, rest], axis=-1) if rest.shape[-1] else out
