"""The versioned price table (`--prices FILE`): US dollars per 1M input, cached-input and output tokens per
model. A model missing from the table has an unknown cost, reported as null, never as 0."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

from rollout.metrics import Price

DEFAULT_PRICES = Path(__file__).resolve().parents[1] / "prices.yaml"


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
    """The table at `path` (default: rollout/prices.yaml)."""
    path = Path(path) if path else DEFAULT_PRICES
    try:
        return PriceTable.model_validate(yaml.safe_load(path.read_text()))
    except FileNotFoundError as error:
        raise FileNotFoundError(f"no price table at {path}; pass --prices FILE (YAML: version, models: "
                                "{name: {input, cached_input, output}} in $ per 1M tokens)") from error
    except ValidationError as error:
        raise ValueError(f"{path} is not a price table ({error}); it needs `version` and `models: {{name: "
                         "{input, cached_input, output}}}` in $ per 1M tokens") from error
