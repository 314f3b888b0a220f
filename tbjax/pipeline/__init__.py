"""The default experiment as stages: warm start, selection, base evaluation, GRPO, trained evaluation and
the comparison, each cached under the run directory, and the results table."""
