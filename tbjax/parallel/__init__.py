"""Devices and processes: meshes from `--mesh` specs, multi-host start-up and the helpers every process
calls in lockstep, the sharding rules, and host-memory offload. The bottom room: it knows no model."""
