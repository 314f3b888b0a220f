"""Checkpoints in and out: HF safetensors directories loaded into a sharded Qwen, written back out, and
published as versioned weight directories that rollout engines load."""
