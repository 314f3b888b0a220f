"""Fault tests: attacks and failures at the boundaries of the servers and the training loop."""
