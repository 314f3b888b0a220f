"""Every section of the run configuration, one class per YAML key and named after it (`grpo` -> GRPOSection,
`warm_start` -> WarmStartSection), grouped by what they configure: model.py (model, mesh), run.py, tasks.py
(tasks, select, evaluate, validation), rollout.py (rollout, user, episode, groups), training.py (grpo, optim,
train, warm_start), lora.py and tau2.py (τ²-bench as the task suite). tbjax.config assembles them into the
tree (`Config`) and loads it; they sit below it so that a module that reads one section (the trainer, the warm
start) need not import the tree.
A component's own parameters (rollout's EpisodeConfig, envs' ChatEndpointConfig) keep the `Config` suffix;
a section built on one subclasses it."""
