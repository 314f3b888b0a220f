"""Publish-to-served time of a weight refresh on CPU: tbjax.models.hf.versions.publish_weights writes a ~50M-parameter
Qwen3 as an HF directory and the embedded JaxEngine loads it (update_weights from disk, the SGLang path's
shape), beside raw writes and reads of the same number of bytes to and from the same disk in the same run
(numpy tofile, with and without fsync; np.fromfile), with bytes/s and ratios, and the publish-to-served time
of the 27B reference (configs/qwen3-27b-3x8-h100.yaml, bfloat16) estimated from the measured bytes/s.

publish_weights does not fsync, and the engine reads back what the page cache still holds: the raw write
without fsync and the raw read are its like-for-like peers, the fsync'd write the disk's own rate. A server
on another host reads from its disk or the network instead; the estimate assumes this run's rates.

    python scripts/bench/refit.py [--rounds 3] [--dir DIR (default: a temporary directory under /tmp)]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import numpy as np
import yaml
from bench_common import CONFIG, median_seconds
from flax import nnx

from tbjax.config import CONFIG_DIR
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import ModelConfig, Qwen
from tbjax.models.hf.versions import publish_weights

REFERENCE = CONFIG_DIR / "qwen3-27b-3x8-h100.yaml"
BF16_BYTES = 2


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def raw_write(path: Path, data: np.ndarray, fsync: bool) -> None:
    """`data` to `path` as one file, flushed to the disk when `fsync`."""
    with path.open("wb") as f:
        data.tofile(f)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def reference_bytes() -> int:
    """The 27B reference's parameters in bfloat16, from its architecture (no checkpoint needed)."""
    architecture = yaml.safe_load(REFERENCE.read_text())["model"]["architecture"]
    return ModelConfig.from_hf_dict(architecture).num_params() * BF16_BYTES


def rate(nbytes: int, seconds: float) -> str:
    return f"{seconds:6.3f} s  {nbytes / seconds / 1e6:8.1f} MB/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender, after 2 warm-up rounds")
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary directory under /tmp)")
    args = parser.parse_args()
    model = Qwen(ModelConfig.from_hf_dict({**CONFIG, "dtype": "float32"}), nnx.Rngs(0))
    engine = JaxEngine(model, slots=1, max_len=64)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        published = publish_weights(model, root / "weights", 0)
        nbytes = directory_bytes(published)
        data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        raw = root / "raw.bin"
        # in this order each round: the engine loads what was just published, the read what was just written
        seconds = median_seconds({
            "publish": lambda: publish_weights(model, root / "weights", 0),
            "load": lambda: asyncio.run(engine.update_weights(str(published), "0")),
            "raw write": lambda: raw_write(raw, data, fsync=False),
            "raw read": lambda: np.fromfile(raw, np.uint8),
            "raw write+fsync": lambda: raw_write(raw, data, fsync=True),
        }, args.rounds)
    asyncio.run(engine.close())
    served = seconds["publish"] + seconds["load"]
    print(f"model: qwen3 {model.config.num_params() / 1e6:.1f}M params float32, {nbytes / 1e6:.1f} MB published, "
          f"{os.cpu_count()} cores, median of {args.rounds} rounds")
    print(f"publish (HF write)     : {rate(nbytes, seconds['publish'])}")
    print(f"engine load from disk  : {rate(nbytes, seconds['load'])}")
    print(f"publish-to-served      : {rate(nbytes, served)}")
    print(f"raw write              : {rate(nbytes, seconds['raw write'])}")
    print(f"raw write + fsync      : {rate(nbytes, seconds['raw write+fsync'])}")
    print(f"raw read               : {rate(nbytes, seconds['raw read'])}")
    print(f"ratio publish / raw write: {seconds['raw write'] / seconds['publish']:.2f}x of its bytes/s; "
          f"engine load / raw read: {seconds['raw read'] / seconds['load']:.2f}x; publish-to-served / raw write + "
          f"fsync: {seconds['raw write+fsync'] / served:.2f}x")
    reference = reference_bytes()
    print(f"27B reference (estimate): {reference / 1e9:.1f} GB in bfloat16 -> publish-to-served "
          f"{reference / (nbytes / served):.0f} s at this run's {nbytes / served / 1e6:.0f} MB/s (one writer, one "
          f"reader, this disk)")


if __name__ == "__main__":
    main()
