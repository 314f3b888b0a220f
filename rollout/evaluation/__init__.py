"""Pieces of `python -m rollout.evaluate` and `python -m rollout.select`: prices, summaries, reports, plots,
engines from command-line flags, the trial runner and the chat-level episode for API models."""
