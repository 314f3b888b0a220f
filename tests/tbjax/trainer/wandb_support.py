"""Reads what an offline W&B run wrote, for the logger's test: the run's transaction log (run-<id>.wandb) is a
LevelDB-style log (a 7-byte W&B header, then 32 KiB blocks of records, each a 7-byte header: CRC32C, length,
type FULL/FIRST/MIDDLE/LAST) of wandb_internal protobuf Records; wandb 0.31 reads it only in its Go core."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

HEADER = 7  # ":W&B", a 2-byte magic number, a version byte
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    out, pending, offset = [], b"", HEADER
    while offset + 7 <= len(data):
        if BLOCK - offset % BLOCK < 7:  # a block's tail too short for a header is padding
            offset += BLOCK - offset % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        chunk = data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind in (FULL, FIRST):
            pending = chunk
        elif kind in (MIDDLE, LAST):
            pending += chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def offline_run(run_dir: Path) -> dict[str, Any]:
    """What the offline runs under `run_dir`/wandb logged, in the order written: the project and name of each
    start, the config (its `_wandb` left out) and the scalars by step (W&B's own `_`-keys left out)."""
    logs = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    run: dict[str, Any] = {"starts": [], "config": {}, "history": {}}
    for record in (r for log in logs for r in records(log)):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["starts"].append((record.run.project, record.run.display_name, record.run.run_id))
            updates = record.run.config.update
        elif kind == "config":
            updates = record.config.update
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            run["history"][int(items.pop("_step"))] = {k: v for k, v in items.items() if not k.startswith("_")}
            continue
        else:
            continue
        run["config"] |= {item.key: json.loads(item.value_json) for item in updates if item.key != "_wandb"}
    return run
