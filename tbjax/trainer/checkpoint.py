"""Orbax checkpoints of a training run: the train state (params, optimizer state, step), the data
iterator's position and a JSON record (step, config fingerprint, task manifest hash, RNG seed).

Saves are asynchronous (the next step's rollouts overlap the write) and every process writes its own
shards. Orbax finalises a step by renaming its temporary directory, so a checkpoint killed mid-write is
never listed. Once a save has finished, process 0 hashes every file of the step directory (in the
background) and writes the SHA-256 sums into `checksums.json` inside it, last and atomically.

Orbax itself checks nothing it reads back: a flipped byte restores as a wrong (often NaN) parameter, and a
truncated or missing file fails deep inside TensorStore. So resume takes the newest checkpoint whose files
match their checksums. Each broken one is reported in one line naming it and the checkpoint resumed from,
and moved aside to `<directory>.broken/` so that the resumed run can save that step again; with no intact
checkpoint the run refuses to start and names every broken one. A checkpoint without checksums (written
before they existed, or by a run killed between Orbax's commit and the checksums) is restored unverified
with a warning, and counts as broken only if Orbax cannot read it.

A checkpoint saved before the train state kept float32 master weights (tbjax.trainer.update) restores onto a
state that keeps them: its parameters are restored and the masters start as their upcast, said in one line.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Generic, TypeVar

import jax
import orbax.checkpoint as ocp
from etils import epath

from rollout.records import atomic_write
from tbjax.parallel.distributed import barrier, is_driver
from tbjax.trainer.save_failures import (
    ORBAX_LOG,
    CheckpointWriteError,
    HeldErrors,
    first_line,
    os_cause,
    quiet_orphaned_writes,
)
from tbjax.trainer.train_state import TrainState, upcast_masters

log = logging.getLogger(__name__)

CHECKSUMS = "checksums.json"  # in each step directory: relative path -> {"size", "sha256"} of every other file
HASH_THREADS = 8  # files hashed at once (hashlib releases the GIL): large checkpoints are many shard files


class ResumeError(ValueError):
    """A checkpoint that must not be resumed as is (its run had another config)."""


class BrokenCheckpointError(ResumeError):
    """No checkpoint of the run is intact: resuming any would train on damaged state."""


class DamagedCheckpoint(Exception):
    """A step directory whose files are not the ones saved; the message names the first that differs."""


# what a checkpoint's train state is restored onto, and comes back as: a TrainState (a run resuming), or the tree
# its metadata describes (tbjax.export.saved_policy, reading whatever config wrote it)
StateT = TypeVar("StateT")


@dataclasses.dataclass(frozen=True)
class Restored(Generic[StateT]):
    """The checkpoint a run resumes from: its step and directory, train state, data iterator state and record."""

    step: int
    path: Path
    state: StateT
    data: dict[str, Any]
    record: dict[str, Any]


class Checkpointer:
    def __init__(self, directory: str | Path, *, keep: int):
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True),
            item_names=("state", "data", "record"),
        )
        self._orbax_errors = HeldErrors()
        quiet_orphaned_writes()
        ORBAX_LOG.addFilter(self._orbax_errors)
        self._sealing: threading.Thread | None = None  # waits for the save in flight, then writes its checksums
        self._sealing_error: CheckpointWriteError | None = None

    def save(self, step: int, state: TrainState, data_state: dict[str, Any], record: dict[str, Any]) -> None:
        """Starts the asynchronous save of `step`, and a thread that writes its checksums once it has finished.
        The previous save's checksums are written first (Orbax waits for the previous save here anyway), so
        Orbax's removal of old checkpoints never races the hashing."""
        self._finish_sealing()
        try:
            self.manager.save(step, args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state),
                record=ocp.args.JsonSave({**record, "step": step})))
        except Exception as error:  # the write's own failure, not a bug of ours: said in one line
            raise self._write_error(step, error) from error
        self._sealing = threading.Thread(target=self._seal, args=(step,), name=f"checksums-{step}", daemon=True)
        self._sealing.start()

    @property
    def failure(self) -> CheckpointWriteError | None:
        """The failure of the save in flight, as soon as it is known (the loop stops the step it overlaps)."""
        return self._sealing_error

    def _seal(self, step: int) -> None:
        """Waits until Orbax has committed `step` on every process, then process 0 writes its checksums; an
        error is kept for the main thread (`failure`, and raised by its next save, wait or close)."""
        try:
            self.manager.wait_until_finished()
            if is_driver():
                write_checksums(self.directory / str(step))
        except Exception as error:  # handed to the main thread, which raises it
            self._sealing_error = self._write_error(step, error)

    def _write_error(self, step: int, error: BaseException) -> CheckpointWriteError:
        kept = [s for s in self.manager.all_steps() if s != step]
        resumes = f"; it resumes from step {max(kept)}" if kept else ""
        return CheckpointWriteError(f"checkpoint of step {step} could not be written to {self.directory}: "
                                    f"{os_cause(error)}. Free disk space or make the directory writable, then "
                                    f"run the same command again{resumes}")

    def _finish_sealing(self) -> None:
        if self._sealing is not None:
            self._sealing.join()
            self._sealing = None
        if self._sealing_error is not None:
            error, self._sealing_error = self._sealing_error, None
            self._orbax_errors.drop()
            raise error
        self._orbax_errors.release()

    def restore_latest(self, target: StateT, fingerprint: str | None, allow_change: bool) -> Restored[StateT] | None:
        """The newest intact checkpoint restored onto `target`'s shardings (a TrainState of arrays or
        ShapeDtypeStructs with shardings); None when there is no checkpoint. Broken ones newer than it are
        reported and moved aside; BrokenCheckpointError names them all when none is intact, ResumeError
        refuses a checkpoint of another config unless `allow_change`. A `fingerprint` of None reads the
        weights of whatever config wrote them (tbjax.export), checking none.

        Every process checks the files itself (the verdicts agree: they read the same files), so no
        process has to wait for another's answer before restoring."""
        broken: list[tuple[Path, str]] = []
        for step in sorted(self.manager.all_steps(), reverse=True):
            try:
                restored = self._restore(step, target)
            except DamagedCheckpoint as damage:
                broken.append((self.directory / str(step), str(damage)))
                continue
            if fingerprint is not None:
                _check_fingerprint(step, restored.record, fingerprint, allow_change)
            self._set_aside(broken, restored.path)
            log.warning("%s step %d (%s)", "restored" if fingerprint is None else "resumed from", step, restored.path)
            return restored
        if broken:
            raise BrokenCheckpointError(
                f"no intact checkpoint to resume from in {self.directory}: "
                + "; ".join(f"{path} ({why})" for path, why in broken)
                + ". Restore them from a copy, or move them away to start from step 0")
        return None

    def restore(self, step: int, target: StateT) -> Restored[StateT]:
        """Checkpoint `step` restored onto `target`'s shardings, whatever config wrote it (a tool reading one
        given checkpoint: tbjax.export); BrokenCheckpointError when its files are not the ones saved or it
        is not a finished checkpoint of this directory."""
        path = self.directory / str(step)
        if step not in self.manager.all_steps():
            raise BrokenCheckpointError(f"{path} is not a finished checkpoint (Orbax lists steps "
                                        f"{sorted(self.manager.all_steps())} in {self.directory})")
        try:
            return self._restore(step, target)
        except DamagedCheckpoint as damage:
            raise BrokenCheckpointError(f"checkpoint {path} is broken: {damage}") from damage

    def _restore(self, step: int, target: StateT) -> Restored[StateT]:
        """Checkpoint `step` restored (DamagedCheckpoint if it is broken), with a warning when no checksums
        vouched for it."""
        path = self.directory / str(step)
        verified, (state, data, record) = self._load(step, path, target)
        if not verified:
            log.warning("checkpoint %s has no %s (written before checkpoints had them, or the run stopped "
                        "before they were written): restored unverified", path, CHECKSUMS)
        return Restored(step, path, state, data, record)

    def _load(self, step: int, path: Path, target: StateT
              ) -> tuple[bool, tuple[StateT, dict[str, Any], dict[str, Any]]]:
        """(whether checksums vouched for it, what Orbax restored); DamagedCheckpoint if it is broken. A failure to
        read a verified checkpoint is no damage (its files are the ones saved) and propagates."""
        verified = verify(path)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        upcast = getattr(target, "master", None) is not None and not _saved_masters(path)
        if upcast:
            abstract = dataclasses.replace(abstract, master=None)
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), data=ocp.args.JsonRestore(),
                record=ocp.args.JsonRestore()))
        except Exception as error:
            if verified:
                raise
            raise DamagedCheckpoint(f"no {CHECKSUMS}, and Orbax cannot read it: {first_line(error)}") from error
        state: StateT = restored["state"]
        if upcast and isinstance(state, TrainState):
            log.warning("checkpoint %s was saved before train states kept float32 master weights: they start as "
                        "its parameters, upcast", path)
            state = upcast_masters(state)
        return verified, (state, restored["data"], restored["record"])

    def _set_aside(self, broken: list[tuple[Path, str]], fallback: Path) -> None:
        """Process 0 moves the broken checkpoints to `<directory>.broken/` (Orbax would refuse to save their
        steps again, and removing them would destroy the evidence), one line each; then every process
        re-reads the step list once process 0 is done."""
        if is_driver():
            aside = self.directory.with_name(self.directory.name + ".broken")
            for path, why in broken:
                moved = _unused(aside / path.name)
                if path.exists():
                    aside.mkdir(exist_ok=True)
                    path.rename(moved)
                log.warning("checkpoint %s is broken (%s): moved to %s; resuming from %s", path, why, moved,
                            fallback)
        if jax.process_count() > 1:
            barrier("tbjax.trainer.checkpoint: broken checkpoints set aside")
        self.manager.reload()

    def wait(self) -> None:
        """Blocks until the save in flight is committed and its checksums written."""
        self._finish_sealing()
        self.manager.wait_until_finished()

    def close(self) -> None:
        """Writes the last save's checksums and closes Orbax's manager (also when that save failed: then
        Orbax's own raise of the failure, already reported, is left out)."""
        failed = False
        try:
            self._finish_sealing()
        except CheckpointWriteError:
            failed = True
            raise
        finally:
            try:
                self.manager.close()
            except Exception:
                if not failed:
                    raise
            finally:
                ORBAX_LOG.removeFilter(self._orbax_errors)


def saved_tree(path: Path) -> Any:
    """The train state's tree as checkpoint `path` (a step directory) saved it, from its metadata: shapes and
    dtypes."""
    return ocp.StandardCheckpointHandler().metadata(epath.Path(path / "state")).tree


def _saved_masters(path: Path) -> bool:
    """Whether checkpoint `path` holds master weights; True when its metadata cannot be read (the restore then
    reports what is wrong with it)."""
    try:
        tree = saved_tree(path)
    except Exception:  # reported by the restore that follows
        return True
    return isinstance(tree, dict) and tree.get("master") is not None


def _check_fingerprint(step: int, record: dict[str, Any], fingerprint: str, allow_change: bool) -> None:
    if record.get("fingerprint") != fingerprint:
        message = (f"checkpoint step {step} was written by a run with config fingerprint "
                   f"{record.get('fingerprint')}, this run's is {fingerprint}")
        if not allow_change:
            raise ResumeError(f"{message}; resume with the same config, start a new run.name, or pass "
                              "train.allow_config_change=true to continue anyway")
        log.warning("%s; continuing because train.allow_config_change is set", message)


def _files(step_dir: Path) -> list[str]:
    """Every file of a step directory but its checksums, as sorted relative paths."""
    manifest = step_dir / CHECKSUMS
    return sorted(p.relative_to(step_dir).as_posix() for p in step_dir.rglob("*") if p.is_file() and p != manifest)


def _digest(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return {"size": os.fstat(f.fileno()).st_size, "sha256": hashlib.file_digest(f, "sha256").hexdigest()}


def _digests(step_dir: Path) -> dict[str, dict[str, Any]]:
    names = _files(step_dir)
    with concurrent.futures.ThreadPoolExecutor(HASH_THREADS) as pool:
        return dict(zip(names, pool.map(lambda name: _digest(step_dir / name), names), strict=True))


def write_checksums(step_dir: Path) -> None:
    """Writes the size and SHA-256 of every file of a finished step directory into its `checksums.json`
    (atomically: a reader sees no checksums or all of them)."""
    atomic_write(step_dir / CHECKSUMS, json.dumps(_digests(step_dir), indent=1, sort_keys=True))


def verify(step_dir: Path) -> bool:
    """True if every file of `step_dir` matches `checksums.json` (none missing, none added); False if it has
    no checksums; DamagedCheckpoint naming the first file that differs otherwise."""
    manifest = step_dir / CHECKSUMS
    if not step_dir.is_dir():
        raise DamagedCheckpoint("the directory is gone")
    if not manifest.is_file():
        return False
    try:
        expected = json.loads(manifest.read_text())
        actual = _digests(step_dir)
    except (OSError, ValueError) as error:
        raise DamagedCheckpoint(f"unreadable: {first_line(error)}") from error
    if not isinstance(expected, dict):
        raise DamagedCheckpoint(f"{CHECKSUMS} is not a mapping of files")
    if actual != expected:
        name = next(n for n in sorted({*actual, *expected}) if actual.get(n) != expected.get(n))
        raise DamagedCheckpoint(_difference(name, actual.get(name), expected.get(name)))
    return True


def _difference(name: str, actual: dict[str, Any] | None, expected: Any) -> str:
    """How file `name` differs from what was saved."""
    if actual is None:
        return f"{name} is missing"
    if expected is None:
        return f"{name} is not in {CHECKSUMS}"
    if isinstance(expected, dict) and expected.get("size") != actual["size"]:
        return f"{name} has {actual['size']} bytes, {expected.get('size')} when saved"
    return f"{name} differs from its checksum"


def _unused(path: Path) -> Path:
    """`path`, or `path.1`, `path.2`... the first that does not exist."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate
