"""Writes tiny random Qwen checkpoints with torch + transformers (the independent reference our parity
tests compare against), each with the tbjax tokenizer and chat template.

    python scripts/make_tiny_model.py OUT_DIR [--arch qwen3 qwen2 qwen3-moe ...] [--dtype float32]

Every weight is randomised, biases and norm scales included, so a bug in any of them shows in the logits.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import transformers

from tbjax.assets.tiny import TINY_ARCHITECTURES, hf_config
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer


def make_checkpoint(out_dir: Path, arch: str, dtype: str = "float32", seed: int = 0) -> Path:
    tokenizer = train_tokenizer()
    config = transformers.AutoConfig.for_model(**hf_config(arch, len(tokenizer)))
    torch.manual_seed(seed)
    # a multimodal config (text_config inside) is saved by its image-text class, as such checkpoints ship
    auto = transformers.AutoModelForImageTextToText if hasattr(config, "text_config") else \
        transformers.AutoModelForCausalLM
    model = auto.from_config(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
            else:
                param.copy_((0.1 if name.endswith("bias") else 0.05) * torch.randn_like(param))
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(out_dir)
    save_tokenizer(tokenizer, out_dir)
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--arch", nargs="+", default=list(TINY_ARCHITECTURES), choices=sorted(TINY_ARCHITECTURES))
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    for arch in args.arch:
        path = make_checkpoint(args.out_dir / arch, arch, args.dtype)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
