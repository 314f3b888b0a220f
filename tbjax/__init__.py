"""tbjax: GRPO post-training of Qwen policies in JAX (Flax NNX), for reliable tool-using agents."""
