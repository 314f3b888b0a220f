"""`python -m tbjax.export SRC OUT [--model DIR] [--dtype bfloat16] [--max-shard-gb 4] [--config-style transformers4]
[--merge]`

SRC is an HF directory (re-written through tbjax: a check that it loads, a dtype conversion, re-sharding
of the files) or a training run's Orbax checkpoint: a run directory (its newest intact checkpoint, as a
resume would take it: e.g. runs/default/grpo), its checkpoints/ directory, or one step directory
(runs/default/grpo/checkpoints/8: that step). A checkpoint holds weights without their architecture, so
--model names the HF directory the run started from (its architecture and tokenizer; in the pipeline, GRPO
starts from warm_start/export/v<updates>, the warm start from assets/<model>). `--dtype float32` exports a
bfloat16 run's float32 master weights themselves rather than their cast, which the engines were served.
OUT loads in transformers. A LoRA run's checkpoint (lora.rank > 0) holds its adapters alone: OUT is then the
adapter in PEFT's format (adapter_config.json, adapter_model.safetensors; peft loads it onto --model), or with
`--merge` the HF model with the adapters folded into its weights.
`--config-style transformers4` spells config.json for servers that pin transformers 4, such as sglang-jax
(`tbjax.models.hf.config_v4`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tbjax.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path, help="an HF directory, a run directory or one of its checkpoints")
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", type=Path,
                        help="for a checkpoint SRC: the HF directory the run started from (architecture, tokenizer)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], help="default: the source checkpoint's dtype")
    parser.add_argument("--max-shard-gb", type=float, default=4.0)
    parser.add_argument("--config-style", choices=["source", "transformers4"], default="source",
                        help="config.json as SRC spells it, or in transformers 4's spelling (for sglang-jax)")
    parser.add_argument("--merge", action="store_true",
                        help="a LoRA run's checkpoint: write the merged HF model instead of the PEFT adapter")
    args = parser.parse_args(argv)
    if args.out.resolve() == args.src.resolve():
        print("error: OUT must differ from SRC (the export reads SRC while writing)", file=sys.stderr)
        return 2
    from tbjax.export.saved_policy import CheckpointSourceError, exportable_policy  # JAX starts here
    from tbjax.models import CheckpointError, UnsupportedModelError, save_pretrained
    from tbjax.models.hf.config_v4 import write_transformers4_config
    from tbjax.models.hf.peft_adapter import save_adapter
    from tbjax.models.lora import merge_adapters
    from tbjax.trainer.checkpoint import BrokenCheckpointError

    try:
        model, tokenizer_dir = exportable_policy(args.src, args.model, args.dtype)
    except (CheckpointSourceError, BrokenCheckpointError, CheckpointError, UnsupportedModelError,
            FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if model.lora_spec is None and args.merge:
        print(f"error: --merge acts only on a LoRA run's checkpoint, and {args.src} holds no adapters",
              file=sys.stderr)
        return 2
    if model.lora_spec is not None and not args.merge:
        if args.dtype or args.config_style != "source":
            print("error: --dtype and --config-style shape an HF model; the adapter is written in PEFT's float32 "
                  "format (add --merge for the merged HF model)", file=sys.stderr)
            return 2
        print(f"wrote {save_adapter(model, model.lora_spec, args.out, base_model=str(args.model))}")
        return 0
    if model.lora_spec is not None:
        merge_adapters(model)
    out = save_pretrained(model, args.out, dtype=args.dtype, max_shard_bytes=int(args.max_shard_gb * 1024**3),
                          tokenizer_dir=tokenizer_dir)
    if args.config_style == "transformers4":
        write_transformers4_config(out)
    print(f"wrote {out}")
    return 0

