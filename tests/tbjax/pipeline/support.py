"""What runs of the whole pipeline share (its test here and the installed wheel's in tests/test_packaging.py):
the settings that shorten a no-flag `tbjax.train` to minutes on CPU."""

ALL_BANDS = "[too_hard,hard,medium,easy,too_easy]"  # a 2-step warm start passes too rarely for the middle bands
SHORT = ["warm_start.copy_drills=2", "warm_start.steps=2", "warm_start.episodes_per_step=4",
         "warm_start.checkpoint_every=1", "select.candidates=4", "select.trials=2", "select.min_clean_runs=1",
         f"select.keep={ALL_BANDS}",
         "train.steps=1", "groups.groups=2", "groups.group_size=4", "groups.max_extra_rounds=0",
         "episode.max_turns=4", "episode.max_tokens_per_turn=24", "evaluate.k=2", "evaluate.bootstrap_resamples=50",
         "validation.tasks=3", "validation.k=1"]
