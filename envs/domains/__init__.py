"""Built-in domains: every sub-package here that defines `DOMAIN` is discovered automatically."""
