"""Faults in a weight publish (`tbjax.models.hf.versions.publish_weights`): the publishing process killed with SIGKILL.

A publish writes root/.v{N}.partial, renames it to root/v{N} and then points the `latest` symlink at it.
Killed at any point, `latest` must still name a complete HF directory that loads, and the next publish must
succeed and leave nothing of the killed one behind. The old code, republishing a version (a resumed run
publishes its step again), deleted root/v{N} before renaming the new one in: killed there, it left `latest`
naming a directory that no longer existed.

The tiny Qwen3 of tests/conftest.py, published for real; the killed publisher is this module run as a script
(`tests.faults.killed_child_support`), hanging at the chosen point until it is killed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import transformers

from tbjax.models import Qwen, from_pretrained
from tbjax.models.hf import exporter as hf_export
from tbjax.models.hf.versions import publish_weights
from tests.faults.killed_child_support import hang_forever, kill_when_hanging

# window -> (what is published before the killed publish, the version the killed publish writes, the dtype it
# writes, the version the next publish writes); a version published again is written in bfloat16, so that what
# `latest` names tells the old weights (float32) from the new
WINDOWS = {
    "mid_write_of_the_staging_directory": ((1,), 2, "float32", 3),
    "after_the_rename_before_the_pointer_flip": ((1,), 2, "float32", 2),
    "republish_after_the_old_version_is_gone": ((1, 2), 2, "bfloat16", 2),
}


@pytest.fixture(scope="module")
def model_dir(tiny_dir) -> Path:
    return tiny_dir("qwen3")


@pytest.fixture(scope="module")
def model(model_dir) -> Qwen:
    return from_pretrained(model_dir)


def hang_at(window: str, root: Path, version: int) -> None:
    """Makes the publish of `version` under `root` hang at `window` (this process is the killed publisher)."""
    if window == "mid_write_of_the_staging_directory":
        hf_export._finalise = hang_forever  # the shards written under temporary names, nothing else
        return
    replace = os.replace

    def hanging_replace(source: str | Path, destination: str | Path) -> None:
        moving_in = Path(source).name.endswith(".partial") and Path(destination) == root / f"v{version}"
        flipping = Path(destination) == root / "latest" and os.readlink(source) == f"v{version}"
        if moving_in if window.startswith("republish") else flipping:
            hang_forever()
        replace(source, destination)

    os.replace = hanging_replace


def publish_then_hang(model_dir: Path, root: Path, window: str) -> None:
    """The killed publisher: publishes `window`'s version, hanging at `window`."""
    _, version, dtype, _ = WINDOWS[window]
    hang_at(window, root, version)
    publish_weights(from_pretrained(model_dir), root, version, dtype=dtype)
    raise AssertionError(f"the publish of v{version} did not hang at {window}")


def loaded_dtype(directory: Path) -> str:
    """The dtype of the complete HF directory `directory`: transformers reads its config, tbjax loads it."""
    transformers.AutoConfig.from_pretrained(directory)
    from_pretrained(directory)
    return json.loads((directory / "config.json").read_text())["dtype"]


@pytest.mark.parametrize("window", WINDOWS)
def test_a_killed_publish_leaves_latest_complete_and_the_next_publish_cleans_up(window, model, model_dir,
                                                                               tmp_path) -> None:
    before, killed, _, following = WINDOWS[window]
    root = tmp_path / "weights"
    for version in before:
        publish_weights(model, root, version)
    kill_when_hanging("tests.faults.test_publish_faults", [str(model_dir), str(root), window],
                      tmp_path / "child.log")
    assert loaded_dtype((root / "latest").resolve(strict=True)) == "float32"  # the last complete publish's
    if window == "mid_write_of_the_staging_directory":
        assert (root / f".v{killed}.partial").is_dir()  # died half-written

    assert publish_weights(model, root, following, dtype="bfloat16") == root / f"v{following}"
    assert os.readlink(root / "latest") == f"v{following}"
    assert loaded_dtype(root / "latest") == "bfloat16"
    assert sorted(p.name for p in root.iterdir()) == sorted({"latest", *(f"v{v}" for v in (*before, following))})


def test_republishing_the_version_latest_names_replaces_it(model, tmp_path) -> None:
    """Uninterrupted, the republish that a kill interrupts above: `latest` names the new weights after it, and
    nothing of the old ones is left."""
    root = tmp_path / "weights"
    for version in (1, 2):
        publish_weights(model, root, version)
    publish_weights(model, root, 2, dtype="bfloat16")
    assert os.readlink(root / "latest") == "v2" and loaded_dtype(root / "latest") == "bfloat16"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "v1", "v2"]


if __name__ == "__main__":  # the killed publisher
    publish_then_hang(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
