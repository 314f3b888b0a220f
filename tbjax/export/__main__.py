"""`python -m tbjax.export`: the command (`tbjax.export.main`, which the `tbjax-export` script runs too)."""

from tbjax.export import main

raise SystemExit(main())
