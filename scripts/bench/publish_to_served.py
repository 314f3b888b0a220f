"""Publish-to-served time of a whole-model publish on CPU, against the machine's own limits measured in the same run.

tbjax.models.hf.versions.publish_weights writes the 48.2M-parameter bench Qwen3 (float32) as an HF directory and
the embedded JaxEngine loads it in place (`update_weights` from disk, the SGLang path's shape). Beside them,
on the same bytes, the same disk and in alternation:

- raw write + fsync: one numpy buffer to one file, flushed to the disk (the disk's own rate);
- page-cache write + read: the same file written without fsync and read back (what a publish and a load
  could cost at best: a publish is never fsynced, and a load reads what the page cache holds);
- memory copy: the bytes copied from one buffer into another (the host's limit).

Prints each one's bytes/s and publish-to-served's ratio to each peer. How much smaller a delta publish is:
scripts/bench/delta_publish.py; the reference configs' estimated publish time: `python -m tbjax.plan.publish_time`.

    python scripts/bench/publish_to_served.py [--rounds 3] [--dir DIR (default: a temporary directory under /tmp)]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
KEEP = 2  # rollout.publish_keep's default
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


def page_cache_round_trip(path: Path, data: np.ndarray, into: np.ndarray) -> None:
    """`data` written to `path` without fsync, then read back into `into` (the page cache both ways)."""
    raw_write(path, data, fsync=False)
    with path.open("rb") as f:
        f.readinto(memoryview(into))


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
        nbytes = directory_bytes(publish_weights(model, root / "weights", 0))
        data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
        into = np.empty_like(data)
        raw = root / "raw.bin"

        versions = itertools.count(1)

        def publish() -> Path:  # a new version each time, the two newest kept, as the trainer publishes
            return publish_weights(model, root / "weights", next(versions), keep=KEEP)

        def load() -> None:
            asyncio.run(engine.update_weights(str(root / "weights" / "latest"), "0"))
        # in this order each round: the engine loads what was just published, the read what was just written
        seconds = median_seconds({
            "publish": publish,
            "load": load,
            "publish-to-served": lambda: asyncio.run(engine.update_weights(str(publish()), "0")),
            "raw write+fsync": lambda: raw_write(raw, data, fsync=True),
            "page-cache write+read": lambda: page_cache_round_trip(raw, data, into),
            "memory copy": lambda: np.copyto(into, data),
        }, args.rounds)
    asyncio.run(engine.close())
    served, fsynced, cached = seconds["publish-to-served"], seconds["raw write+fsync"], seconds["page-cache write+read"]
    print(f"model: qwen3 {model.config.num_params() / 1e6:.1f}M params float32, {nbytes / 1e6:.1f} MB published, "
          f"{os.cpu_count()} cores, median of {args.rounds} rounds")
    print(f"publish (HF write)      : {rate(nbytes, seconds['publish'])}")
    print(f"engine load (in place)  : {rate(nbytes, seconds['load'])}")
    print(f"publish-to-served       : {rate(nbytes, served)}")
    print(f"raw write + fsync       : {rate(nbytes, fsynced)}")
    print(f"page-cache write + read : {rate(nbytes, cached)}")
    print(f"memory copy             : {rate(nbytes, seconds['memory copy'])}")
    print(f"publish-to-served reaches {fsynced / served:.2f}x of raw write + fsync's bytes/s, {cached / served:.2f}x "
          f"of a page-cache write + read's, {seconds['memory copy'] / served:.2f}x of a memory copy's")
    print(f"27B reference: {reference_bytes() / 1e9:.1f} GB in bfloat16 per publish; its estimate per node: "
          "python -m tbjax.plan.publish_time configs/qwen3-27b-3x8-h100.yaml --publish-probe")


if __name__ == "__main__":
    main()
