"""A renamed config key (tbjax.config.RENAMED_KEYS), set in a config or an override, fails naming its new name,
which takes the same value: `train.refit_probe=false` says to set train.weight_probe."""

import re

import pytest
import yaml

from tbjax.config import RENAMED_KEYS, ConfigError, load_config

VALUES = {"groups.format_penalty": "0.2", "train.refit_probe": "false", "train.refit_probe_tolerance": "0.01"}


@pytest.mark.parametrize("old", sorted(RENAMED_KEYS))
def test_an_old_key_fails_naming_its_new_one(old: str) -> None:
    new = RENAMED_KEYS[old]
    named = re.escape(f"(did you mean {new}? {old} is its old name)")
    with pytest.raises(ConfigError, match=f"{re.escape(old)}: .*{named}"):
        load_config(overrides=[f"{old}={VALUES[old]}"])
    load_config(overrides=[f"{new}={VALUES[old]}"])


def test_a_run_saved_before_the_renames_is_read_under_the_new_names(tmp_path) -> None:
    """A run's own config.yaml (what tbjax.serve --run-config and the draws table read) holds every key as its
    version named it; read as a run's saved config, the old names mean the new keys."""
    config = load_config("smoke", overrides=["train.weight_probe_tolerance=0.01"])
    tree = yaml.safe_load(config.to_yaml())
    for old, new in RENAMED_KEYS.items():
        (old_section, old_key), (new_section, new_key) = old.split("."), new.split(".")
        tree[old_section][old_key] = tree[new_section].pop(new_key)
    saved = tmp_path / "config.yaml"
    saved.write_text(yaml.safe_dump(tree))
    assert load_config(saved, saved_by_run=True) == config
    with pytest.raises(ConfigError, match="did you mean grpo.format_penalty"):
        load_config(saved)
