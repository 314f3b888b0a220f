"""Will it fit: the update and the decode step compiled ahead of time for a target machine from abstract
inputs, an analytic memory estimate beside the compiler's, and the report `python -m tbjax.compile` prints."""
