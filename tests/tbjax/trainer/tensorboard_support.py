"""TensorBoard event files read back without TensorBoard, for the metrics log's tests and the multi-process
training test: each record's framing and checksums checked, and a log's scalars by tag and step."""

import struct
from pathlib import Path

from tensorboardX.crc32c import crc32c
from tensorboardX.proto.event_pb2 import Event


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path: Path) -> list[Event]:
    """An event file's records (TFRecord framing: length, masked CRC-32C of it, payload, masked CRC-32C of
    it), both checksums checked."""
    data, events, offset = path.read_bytes(), [], 0
    while offset < len(data):
        header = data[offset:offset + 8]
        (length,), (header_crc,) = struct.unpack("<Q", header), struct.unpack("<I", data[offset + 8:offset + 12])
        payload = data[offset + 12:offset + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])
        assert (header_crc, payload_crc) == (masked_crc(header), masked_crc(payload)), f"corrupt record in {path}"
        events.append(Event.FromString(payload))
        offset += 16 + length
    return events


def read_scalars(directory: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} over every event file under `directory`."""
    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in read_events(path):
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars
