"""The `lora` section: GRPO trains low-rank adapters on the policy's projections instead of every weight
(tbjax.models.lora adds them, tbjax.trainer.update keeps the base frozen). Rank 0, the default, trains every
weight. `LoraSpec` is what an adapter set is (rank, alpha, targets), here because parsing a config imports no
JAX."""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from pydantic import NonNegativeInt, PositiveFloat, model_validator

from tbjax.sections.base import Section

# HF's module names (what PEFT's target_modules and SGLang's --lora-target-modules name)
ATTENTION_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GATED_DELTANET = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")
PROFILES: dict[str, tuple[str, ...]] = {"attention_mlp": ATTENTION_MLP, "all_linear": ATTENTION_MLP + GATED_DELTANET}


class LoraError(ValueError):
    """A LoRA setting that cannot act on this model."""


class LoraRecord(TypedDict):
    """A LoraSpec as a checkpoint's JSON record keeps it."""

    rank: int
    alpha: float
    targets: list[str]


@dataclasses.dataclass(frozen=True)
class LoraSpec:
    rank: int
    alpha: float
    targets: tuple[str, ...] = ("attention_mlp",)

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise LoraError(f"lora rank {self.rank}: it must be at least 1")
        unknown = [t for t in self.targets if t not in PROFILES and t not in ATTENTION_MLP + GATED_DELTANET]
        if unknown:
            raise LoraError(f"lora targets {unknown} are neither profiles {sorted(PROFILES)} nor projections "
                            f"{list(ATTENTION_MLP + GATED_DELTANET)}")

    def to_record(self) -> LoraRecord:
        """What a checkpoint keeps of the spec, so that its adapters can be exported without the run's config."""
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets)}

    @classmethod
    def from_record(cls, record: LoraRecord) -> LoraSpec:
        return cls(rank=int(record["rank"]), alpha=float(record["alpha"]), targets=tuple(record["targets"]))

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    @property
    def modules(self) -> frozenset[str]:
        """The HF module names the targets cover."""
        return frozenset(name for t in self.targets for name in PROFILES.get(t, (t,)))


class LoraSection(Section):
    rank: NonNegativeInt = 0  # 0: full-parameter training; the seed's LoRA recipe: 16
    alpha: PositiveFloat = 32.0  # the update is scaled by alpha / rank
    # dropout on the adapters' input would make the trainer's log-probs those of a policy that never sampled
    dropout: float = 0.0
    # profiles (attention_mlp; all_linear adds the Gated DeltaNet projections, which a hybrid needs) or HF
    # module names (q_proj, in_proj_qkv, ...)
    targets: list[str] = ["attention_mlp"]
    seed: int = 0  # A's initialisation; B starts at zero, so step 0 is the base policy

    @model_validator(mode="after")
    def _can_act(self) -> LoraSection:
        if self.dropout:
            raise ValueError(f"lora.dropout={self.dropout}: GRPO's ratio and TIS compare the trainer's log-probs "
                             "with the sampling policy's, which dropout would change on every pass; set "
                             "lora.dropout=0 (the seed's recipe)")
        # a field set to its default is what a run's saved config.yaml holds, and acts no differently
        changed = sorted(name for name in self.model_fields_set - {"rank"}
                         if getattr(self, name) != type(self).model_fields[name].default)
        if not self.enabled and changed:
            raise ValueError(f"lora.{changed[0]} has no effect with lora.rank=0 (full-parameter training): set "
                             "lora.rank (e.g. 16) to train adapters")
        if self.enabled:
            self.spec()  # refuses unknown targets
        return self

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    def spec(self) -> LoraSpec:
        return LoraSpec(rank=self.rank, alpha=self.alpha, targets=tuple(self.targets))
