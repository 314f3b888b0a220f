"""What `python -m tbjax.export` reads: an HF directory, or a training run's Orbax checkpoint as a model (a
run directory: its newest intact checkpoint, as a resume would take it; its checkpoints/ directory: the same;
or one step directory, checkpoints/<step>: that step).

Why from the checkpoint's own metadata: the saved train state holds the optimizer state too, whose tree
depends on the run's optimizer settings, which the run directory does not record. The restore target is
read from the newest step's metadata instead (every step of a run has the same tree), on this process's
first device; the parameters are then put into the architecture of the HF directory the run started from
(`model_dir`, which also gives the tokenizer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
from flax import nnx

from tbjax.models import ModelConfig, Qwen, from_pretrained
from tbjax.models.hf.importer import abstract_model
from tbjax.models.lora import add_adapters
from tbjax.sections.lora import LoraSpec
from tbjax.trainer.checkpoint import BrokenCheckpointError, Checkpointer, Restored, saved_tree

CHECKPOINTS = "checkpoints"  # a run directory's, as tbjax.trainer.run_setup and tbjax.warmstart.warm_start name it


class CheckpointSourceError(ValueError):
    """A path that names no checkpoint (neither a run directory, its checkpoints/ nor a step directory), or
    a checkpoint whose parameters do not fit the architecture given."""


def _steps(checkpoints: Path) -> list[Path]:
    """The step directories of a checkpoints directory (named by their step, holding the train state)."""
    return [p for p in checkpoints.iterdir() if p.name.isdigit() and (p / "state").is_dir()]


def locate(path: Path) -> tuple[Path, int | None] | None:
    """(checkpoints directory, step) of a checkpoint step directory; (checkpoints directory, None: the newest
    intact) of a run directory or of its checkpoints directory; None for anything else."""
    if path.name.isdigit() and (path / "state").is_dir():
        return path.parent, int(path.name)
    for checkpoints in (path / CHECKPOINTS, path):
        if checkpoints.is_dir() and _steps(checkpoints):
            return checkpoints, None
    return None


def saved_state(checkpoints: Path) -> dict[str, Any]:
    """The train state's tree as saved (shapes and dtypes from the newest step with readable metadata), placed
    on this process's first device: a restore target that needs no trainer."""
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    for step_dir in sorted(_steps(checkpoints), key=lambda p: int(p.name), reverse=True):
        try:
            tree = saved_tree(step_dir)
        except (OSError, ValueError):
            continue
        return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device), tree)
    raise BrokenCheckpointError(f"no checkpoint in {checkpoints} has readable metadata (state/_METADATA)")


def restore_checkpoint(path: Path) -> Restored[dict[str, Any]]:
    """The checkpoint `path` names (see `locate`), restored whatever config wrote it; CheckpointSourceError
    for a path that names none, BrokenCheckpointError when none it names is intact."""
    located = locate(path.absolute())  # Orbax reads checkpoints by absolute path only
    if located is None:
        raise CheckpointSourceError(f"{path} is neither a run directory (with {CHECKPOINTS}/<step>/), its "
                                  f"{CHECKPOINTS}/ directory nor a checkpoint ({CHECKPOINTS}/<step>/ with state/)")
    checkpoints, step = located
    target = saved_state(checkpoints)
    checkpointer = Checkpointer(checkpoints, keep=len(_steps(checkpoints)))
    try:
        restored = (checkpointer.restore(step, target) if step is not None
                    else checkpointer.restore_latest(target, fingerprint=None, allow_change=True))
    finally:
        checkpointer.close()
    if restored is None:  # every step directory vanished since `locate` saw it
        raise BrokenCheckpointError(f"no checkpoint left in {checkpoints}")
    return restored


def _name(path: tuple[Any, ...]) -> str:
    """A leaf's path as "layers/0/mlp/...": Orbax's metadata spells the model's integer keys as strings."""
    return "/".join(str(getattr(key, "key", getattr(key, "idx", key))) for key in path)


def _shape(shape: tuple[int, ...] | None) -> str:
    return "absent" if shape is None else f"of shape {shape}"


def _fitted(expected: dict[str, Any], params: dict[str, Any], mismatch: str) -> dict[str, Any]:
    """`params` in the tree of `expected` (a pure dict of abstract leaves); CheckpointSourceError naming the
    first parameter that is missing, extra or of another shape, `mismatch` saying what did not fit what."""
    want = {_name(path): leaf.shape for path, leaf in jax.tree_util.tree_leaves_with_path(expected)}
    have = {_name(path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(params)}
    for name in sorted(want.keys() | have.keys()):
        shape = have[name].shape if name in have else None
        if shape != want.get(name):
            raise CheckpointSourceError(
                f"{mismatch}: parameter {name} is {_shape(shape)} in the checkpoint, {_shape(want.get(name))} in the "
                "architecture; give the HF directory the run started from")
    return jax.tree_util.tree_map_with_path(lambda path, _: have[_name(path)], expected)


def checkpoint_model(params: dict[str, Any], model_dir: Path) -> Qwen:
    """`params` (a train state's) in the architecture of the HF directory `model_dir`; CheckpointSourceError
    naming the first parameter that does not fit."""
    graphdef, state = abstract_model(ModelConfig.from_pretrained(model_dir))
    fitted = _fitted(nnx.to_pure_dict(state), params, f"the checkpoint does not fit {model_dir}'s architecture")
    nnx.replace_by_pure_dict(state, fitted)
    model = nnx.merge(graphdef, state)
    model.source_dir = str(model_dir)  # the source's tensors tbjax does not model are exported unchanged
    return model


def exportable_policy(src: Path, model_dir: Path | None, dtype: str | None = None) -> tuple[Qwen, Path]:
    """(the model `src` holds, the directory whose tokenizer goes with it), `src` an HF directory or a
    training checkpoint (with `model_dir`, the HF directory the run started from). With `dtype` float32 a
    checkpoint's float32 master weights are the model, where it keeps them (tbjax.trainer.update); its
    parameters, their cast, otherwise."""
    if (src / "config.json").is_file():
        return from_pretrained(src), src
    if locate(src) is None:
        raise CheckpointSourceError(f"SRC {src} is neither an HF model directory (config.json) nor a training "
                                    "run's checkpoint: a run directory (with checkpoints/<step>/), its checkpoints/ "
                                    "directory or one step directory (checkpoints/<step>/)")
    if model_dir is None:
        raise CheckpointSourceError(f"SRC {src} is a training checkpoint, which holds parameters only: pass --model "
                                    "DIR, the HF directory the run started from (its architecture and tokenizer)")
    restored = restore_checkpoint(src)
    if "lora" in restored.record:
        print(f"exporting step {restored.step} ({restored.path}): LoRA adapters on {model_dir}")
        return adapted_model(restored.state["params"], LoraSpec.from_record(restored.record["lora"]),
                             model_dir), model_dir
    masters = restored.state.get("master") if dtype == "float32" else None
    print(f"exporting step {restored.step} ({restored.path}){', its float32 master weights' if masters else ''}")
    return checkpoint_model(masters or restored.state["params"], model_dir), model_dir


def adapted_model(adapters: dict[str, Any], spec: LoraSpec, model_dir: Path) -> Qwen:
    """The base at `model_dir` (a LoRA run never changes it) carrying the checkpoint's `adapters`;
    CheckpointSourceError when they do not fit it."""
    model = from_pretrained(model_dir)
    add_adapters(model, spec)
    state = nnx.state(model, nnx.LoRAParam)
    nnx.replace_by_pure_dict(state, _fitted(nnx.to_pure_dict(state), adapters,
                                            f"the checkpoint's adapters do not fit {model_dir}"))
    nnx.update(model, state)
    return model
