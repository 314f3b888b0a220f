"""GRPO training: the objective, log-probs, packing episodes into rows, the update on the mesh, Orbax
checkpoints, the engine-vs-trainer checks, the hand-over of colocated GPUs, and the loop that drives them."""
