"""Assets made on the spot instead of downloaded: a small BPE tokenizer with our chat template and tiny
random Qwen checkpoints for tests and the laptop default."""
