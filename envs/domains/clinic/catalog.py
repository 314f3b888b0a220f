"""Fixed reference data of Riverbend Outpatient Clinic (catalog.yaml): insurers, practitioners, imaging,
medicines, pharmacies and the parts of generated names.

Kept apart from the row generator so templates can name practitioners and procedures without re-reading
the database, and so the policy's numbers (fees, thresholds) have one source. Rows are tuples in the column
order of the tables they seed.
"""

from __future__ import annotations

from importlib.resources import files

import yaml

_DATA = yaml.safe_load(files(__name__.rpartition(".")[0]).joinpath("catalog.yaml").read_text())

INSURANCE_PLANS: list[tuple] = [tuple(row) for row in _DATA["insurance_plans"]]
PLAN_WEIGHTS: list[int] = _DATA["plan_weights"]
PRACTITIONERS: list[tuple] = [tuple(row) for row in _DATA["practitioners"]]
PROCEDURES: list[tuple] = [tuple(row) for row in _DATA["procedures"]]
MEDICINES: list[tuple] = [tuple(row) for row in _DATA["medicines"]]
PHARMACIES: list[str] = _DATA["pharmacies"]
GIVEN: list[str] = _DATA["given"]
FAMILY: list[str] = _DATA["family"]
POSTCODES: list[str] = _DATA["postcodes"]

FAMILY_MEDICINE = "Family Medicine"
IMAGING = "Diagnostic Imaging"
SPECIALTIES_NEEDING_REFERRAL = sorted({p[2] for p in PRACTITIONERS if p[3]})
