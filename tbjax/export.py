"""`python -m tbjax.export SRC OUT [--dtype bfloat16] [--max-shard-gb 4] [--config-style transformers4]`

SRC is an HF directory (re-written through tbjax: a check that it loads, a dtype conversion, re-sharding
of the files); Orbax training checkpoints join once the trainer writes them. OUT loads in transformers.
`--config-style transformers4` spells config.json for servers that pin transformers 4, such as sglang-jax
(`tbjax.models.hf_config_v4`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tbjax.models import CheckpointError, UnsupportedModelError, from_pretrained, save_pretrained
from tbjax.models.hf_config_v4 import write_transformers4_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tbjax.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], help="default: the source checkpoint's dtype")
    parser.add_argument("--max-shard-gb", type=float, default=4.0)
    parser.add_argument("--config-style", choices=["source", "transformers4"], default="source",
                        help="config.json as SRC spells it, or in transformers 4's spelling (for sglang-jax)")
    args = parser.parse_args(argv)
    if args.out.resolve() == args.src.resolve():
        print("error: OUT must differ from SRC (the export reads SRC while writing)", file=sys.stderr)
        return 2
    try:
        model = from_pretrained(args.src)
    except (CheckpointError, UnsupportedModelError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = save_pretrained(model, args.out, dtype=args.dtype, max_shard_bytes=int(args.max_shard_gb * 1024**3),
                          tokenizer_dir=args.src)
    if args.config_style == "transformers4":
        write_transformers4_config(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
