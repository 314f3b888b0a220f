"""Which weights an engine serves, as loaded from published directories, and what a load that fails midway
goes back to.

A load writes into the served parameters in place (weight_loading.py for whole versions, delta_loading.py for
deltas), so a failure after the first tensor leaves them half written. The engine then writes back, the same
way, the chain it last served: the newest whole directory it loaded (the one `tbjax.serve` started from, or a
later whole update) and the deltas applied on it since, in order. Where there is no chain (a model built in
code) or it no longer reads, the weights are `broken`: the engine refuses requests, naming the version that
failed, until a load succeeds.
"""

from __future__ import annotations

from pathlib import Path

from flax import nnx

from rollout.engines.protocol import EngineError
from tbjax.engine.delta_loading import CheckedDelta, is_delta, open_delta, write_delta
from tbjax.engine.weight_checks import WeightsError, unreadable
from tbjax.engine.weight_loading import CheckedDirectory, open_checked, write_weights
from tbjax.models.architecture import ModelConfig

Checked = CheckedDirectory | CheckedDelta


class InPlaceWeights:
    """An engine's weights as loaded from directories: the chain a failed load goes back to (`chain`: a whole
    directory, then the deltas applied on it; empty for weights built in code) and the version such a load left
    broken when there was none (`broken`)."""

    def __init__(self, served: ModelConfig, directory: str | Path | None) -> None:
        self.served = served
        self.chain: list[Path] = [] if directory is None else [Path(directory)]
        self.broken: str | None = None

    @property
    def directory(self) -> Path | None:
        """The directory loaded last (whole or delta): the version the engine serves."""
        return self.chain[-1] if self.chain else None

    def check(self, hf_dir: str | Path) -> Checked:
        """The pre-flight against the served model (and, for a delta, the version it applies on)."""
        if is_delta(hf_dir):
            return open_delta(hf_dir, self.served, self.directory)
        return open_checked(hf_dir, self.served)

    def load(self, state: nnx.State, checked: Checked, version: str) -> None:
        """Writes `checked` into `state` as weight `version`; on a failure midway, goes back to the chain (or
        marks the weights broken) and raises the WeightsError, saying which."""
        try:
            _write(state, checked)
        except Exception as error:  # noqa: BLE001 - whatever stopped the load, the half-written weights are undone
            failure = error if isinstance(error, WeightsError) else unreadable(checked.directory, error)
            raise self._recover(state, failure, version) from error
        self.chain = [*self.chain, checked.directory] if isinstance(checked, CheckedDelta) else [checked.directory]
        self.broken = None

    @property
    def broken_error(self) -> EngineError | None:
        """What requests get while a failed load has left the weights broken (None: they are not)."""
        if self.broken is None:
            return None
        return EngineError(f"weight version {self.broken} failed to load midway and left the engine's weights "
                           "broken, with no earlier directory to go back to; load good weights (update_weights, "
                           "/update_weights_from_disk) to serve again")

    def refuse_if_broken(self) -> None:
        if (error := self.broken_error) is not None:
            raise error

    def _recover(self, state: nnx.State, failure: WeightsError, version: str) -> WeightsError:
        """Writes the chain back into `state` (or marks the weights broken) -> the error to raise."""
        if self.chain:
            try:
                whole, *deltas = self.chain
                write_weights(state, open_checked(whole, self.served))
                for done, delta in zip([whole, *deltas], deltas, strict=False):
                    write_delta(state, open_delta(delta, self.served, done))
            except Exception as error:  # noqa: BLE001 - reported with the failure that made it necessary
                failure = WeightsError(f"{failure}. Going back to {self.directory} failed too ({error})")
            else:
                return WeightsError(f"{failure}. The engine went back to the weights of {self.directory} and "
                                    "serves on with them")
        self.chain, self.broken = [], version
        return WeightsError(f"{failure}. The engine's weights are now partly version {version}'s: it refuses "
                            "requests until good weights load")


def _write(state: nnx.State, checked: Checked) -> None:
    if isinstance(checked, CheckedDelta):
        write_delta(state, checked)
    else:
        write_weights(state, checked)
