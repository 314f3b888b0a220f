"""Weight publication: the trained policy as an HF safetensors directory `root/v{version}` (or, under LoRA, its
adapters as a PEFT directory) that rollout engines load, and an atomic `latest` pointer.

Readers never see a half-written version, and `latest` names a complete one wherever the publishing process
dies (SIGKILL, a preempted machine): the directory is written under a hidden staging name and renamed, then
`latest` (a symlink) is replaced by rename too. Republishing a version (a resumed run publishes its step
again) renames the old directory away before the rename; when `latest` names it, `latest` first moves to a
hard-linked copy of it, so it never names a missing directory (the old code deleted the directory `latest`
named, and a kill before the rename left `latest` dangling until the next publish). Every publish removes
what it replaced and what a killed one left (staging directories, old versions, copies) once `latest` names
the new version, and, given a keep count, the versions older than the newest `keep`. Those beyond the newest
`keep - 1` (and `latest`) go before the new version is written: engines read `latest` meanwhile, so nothing
they may read goes sooner, the directory holds at most max(keep, 2) versions even mid-write (node memory,
under /dev/shm) and the new files take the pages the old ones freed, which the kernel need not find anew. The
same code path as `tbjax.export`, so what the engines load is exactly what transformers would load.

Nothing is fsynced: a run resumed after a crash publishes its step again, so a publish can live in node-local
memory (/dev/shm). With `replicas`, every process publishes the same path on its own host from the replica it
holds (the servers of a host read their host's copy, no shared file system); otherwise the driver writes and
the other processes only take part in the gathers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import jax

from tbjax.models import Qwen, save_pretrained
from tbjax.models.hf.config_v4 import write_transformers4_config
from tbjax.models.hf.peft_adapter import save_adapter
from tbjax.parallel.distributed import barrier, is_driver
from tbjax.sections.lora import LoraSpec

LATEST = "latest"
DELTA_FILE = "delta.json"  # in a version that holds only what changed since the one before (tbjax.models.hf.delta)
STAGING = ".partial"  # suffix of a version being written
REPLACED = ".replaced"  # suffix of the copy of a version being published again, which `latest` names meanwhile
REMOVED = ".removed"  # suffix of a version published again, renamed away to be removed


def version_dir(root: str | Path, version: int | str) -> Path:
    return Path(root) / f"v{version}"


def publish_weights(model: Qwen, root: str | Path, version: int | str, *, tokenizer_dir: str | Path | None = None,
                    dtype: str | None = None, transformers4_config: bool = False, replicas: bool = False,
                    keep: int | None = None) -> Path:
    """Writes `model` as root/v{version} (HF format) and points root/latest at it. Returns the directory.
    Every process calls it. `transformers4_config`: config.json for servers that pin transformers 4
    (sglang-jax). `replicas`: every process writes `root` on its own host (processes sharing a host need roots
    of their own). `keep`: how many versions stay (None: all)."""
    owner = replicas or is_driver()

    def write(staging: Path) -> None:
        save_pretrained(model, staging, tokenizer_dir=tokenizer_dir, dtype=dtype, writes=owner)
        if transformers4_config and owner:
            write_transformers4_config(staging)
    return publish_version(root, version, write, owner=owner, collective=True, keep=keep)


def publish_adapter(model: Qwen, spec: LoraSpec, root: str | Path, version: int | str, *,
                    base_model: str = "", replicas: bool = False, keep: int | None = None) -> Path:
    """Writes `model`'s LoRA adapters as root/v{version} in PEFT's format (what SGLang's /load_lora_adapter
    reads) and points root/latest at it, as `publish_weights` does for whole models. The adapters are
    replicated, so the driver alone writes them, or with `replicas` every process its own host's copy."""
    return publish_version(root, version, lambda staging: save_adapter(model, spec, staging, base_model=base_model),
                           owner=replicas or is_driver(), collective=False, keep=keep)


def publish_version(root: str | Path, version: int | str, write: Callable[[Path], object], *, owner: bool,
                    collective: bool, keep: int | None = None) -> Path:
    """Runs `write(staging)` (on every process when `collective`, else on the owner alone); the owner of `root`
    (the driver, or every process for host replicas) then moves the staging directory into place as
    root/v{version} and points `latest` at it (the module docstring's protocol)."""
    if keep is not None and keep < 1:
        raise ValueError(f"keep={keep}: at least the version just published stays; give keep >= 1 or None (all)")
    root = Path(root)
    final = version_dir(root, version)
    staging = root / f".{final.name}{STAGING}"
    if owner:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)  # a killed publish's; `latest` never names a staging directory
        if keep is not None and (latest := _latest_name(root)) is not None:
            _remove_old_versions(root, max(keep - 1, 1), latest)
    if collective or owner:
        write(staging)
    if owner:
        _move_into_place(staging, final)
        _point_latest_at(final)
        _remove_leftovers(root)
        if keep is not None:
            _remove_old_versions(root, keep, final.name)
    if jax.process_count() > 1:
        barrier(f"published v{version}")  # the same name on every process, whose roots may differ
    return final


def _move_into_place(staging: Path, final: Path) -> None:
    """Renames the complete `staging` to `final`. A `final` already there (the version published again) is renamed
    away first, then removed by `_remove_leftovers`, so a kill never leaves it half deleted under its name; if
    `latest` names it, `latest` first moves to a hard-linked copy of it (no data is copied)."""
    if final.exists():
        if _latest_name(final.parent) == final.name:
            kept = final.parent / f".{final.name}{REPLACED}"
            shutil.rmtree(kept, ignore_errors=True)  # `latest` names `final`, not this
            shutil.copytree(final, kept, copy_function=_link)
            _point_latest_at(kept)
        removed = final.parent / f".{final.name}{REMOVED}"
        shutil.rmtree(removed, ignore_errors=True)  # a killed publish's
        os.replace(final, removed)
    os.replace(staging, final)


def _point_latest_at(directory: Path) -> None:
    """Replaces the `latest` symlink beside `directory` by one naming it, atomically (rename)."""
    pointer = directory.parent / f".{LATEST}.tmp"
    pointer.unlink(missing_ok=True)
    pointer.symlink_to(directory.name)
    os.replace(pointer, directory.parent / LATEST)


def _latest_name(root: Path) -> str | None:
    """The name `latest` holds, or None before the first publication."""
    try:
        return os.readlink(root / LATEST)
    except OSError:  # no symlink there
        return None


def _remove_leftovers(root: Path) -> None:
    """Removes the replaced versions, and what killed publishes left (staging directories, replaced versions and
    their copies). Called once `latest` names the version just published, so it names none of them."""
    for path in root.iterdir():
        if path.name.startswith(".v") and path.name.endswith((STAGING, REPLACED, REMOVED)):
            shutil.rmtree(path, ignore_errors=True)


def _remove_old_versions(root: Path, keep: int, latest: str) -> None:
    """Removes the versions older than the newest `keep` (by version number), except `latest` (the one just
    published) and the chain a delta needs: the newest whole version and every version after it."""
    versions = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name[:1] == "v"
                       and p.name[1:].isdigit()), key=lambda p: int(p.name[1:]), reverse=True)
    whole = next((i for i, p in enumerate(versions) if not (p / DELTA_FILE).is_file()), len(versions))
    for path in versions[max(keep, whole + 1):]:
        if path.name != latest:
            shutil.rmtree(path, ignore_errors=True)


def _link(source: str, destination: str) -> None:
    """copytree's copy function: a hard link, or a copy on a file system without them."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
