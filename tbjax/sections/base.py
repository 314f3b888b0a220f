"""The base of every config section: frozen, and an unknown key is an error (tbjax.config names the closest)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
