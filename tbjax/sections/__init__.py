"""The typed sections of the run configuration that tbjax.config's tree holds, below it so that the modules
that read a section (the trainer, the warm start) need not import the tree."""
