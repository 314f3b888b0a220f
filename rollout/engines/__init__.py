"""Engine clients that speak to inference servers over HTTP (no JAX here; the embedded engine is in tbjax)."""
