"""Version directories under a keep count (`tbjax.models.hf.versions.publish_version`): `keep` versions once a
publish is done, and no more than max(keep, 2) while the next one is written (a publish under /dev/shm holds
node memory), never removing the one `latest` names, which engines read meanwhile."""

from pathlib import Path

import pytest

from tbjax.models.hf.versions import LATEST, publish_version


def versions_present(root: Path) -> list[int]:
    return sorted(int(p.name[1:]) for p in root.iterdir() if p.name[:1] == "v" and p.name[1:].isdigit())


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_old_versions_go_before_the_next_is_written_but_latest_stays(tmp_path, keep) -> None:
    root = tmp_path / "weights"
    seen_while_writing: dict[int, list[int]] = {}
    for version in range(6):
        def write(staging: Path, version: int = version) -> None:
            seen_while_writing[version] = versions_present(root) if root.is_dir() else []
            staging.mkdir(parents=True)
            (staging / "model.safetensors").write_bytes(bytes(1024))
        publish_version(root, version, write, owner=True, collective=False, keep=keep)
        assert versions_present(root) == list(range(max(version - keep + 1, 0), version + 1))
        assert (root / LATEST).resolve() == root / f"v{version}"
    for version, seen in seen_while_writing.items():
        # while the next version is written: the newest keep - 1, and at least the one `latest` names
        assert seen == list(range(max(version - max(keep - 1, 1), 0), version))
