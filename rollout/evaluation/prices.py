"""The versioned price table (`--prices FILE`): US dollars per 1M input, cached-input and output tokens per
model. A model missing from the table has an unknown cost, reported as null, never as 0.

The default is configs/prices.yaml: one copy, edited with the other configs, shipped inside this package
(rollout/evaluation/prices.yaml links to it) so that an installed wheel has it too. Where it is missing all
the same, every cost is unknown (exactly what an empty table gives) and a warning says to pass `--prices FILE`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

from rollout.metrics import Price

DEFAULT_PRICES = Path(__file__).parent / "prices.yaml"
log = logging.getLogger(__name__)


class ModelPrice(BaseModel):
    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)


class PriceTable(BaseModel):
    version: str
    models: dict[str, ModelPrice] = {}

    def price(self, model: str) -> Price | None:
        entry = self.models.get(model)
        return None if entry is None else Price(entry.input, entry.cached_input, entry.output)


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The table at `path` (default: configs/prices.yaml; none there: an empty table, every cost unknown)."""
    if path is None and not DEFAULT_PRICES.exists():
        log.warning("no price table at %s: every cost is unknown; pass "
                    "--prices FILE", DEFAULT_PRICES)
        return PriceTable(version="none", models={})
    path = Path(path) if path else DEFAULT_PRICES
    try:
        return PriceTable.model_validate(yaml.safe_load(path.read_text()))
    except FileNotFoundError as error:
        raise FileNotFoundError(f"no price table at {path}; pass --prices FILE (YAML: version, models: "
                                "{name: {input, cached_input, output}} in $ per 1M tokens)") from error
    except ValidationError as error:
        raise ValueError(f"{path} is not a price table ({error}); it needs `version` and `models: {{name: "
                         "{input, cached_input, output}}}` in $ per 1M tokens") from error
