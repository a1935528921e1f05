"""Read the scalars of TensorBoard event files (TFRecord framing around tensorboardX's Event protos)."""

from __future__ import annotations

import struct
from pathlib import Path


def read_scalars(folder: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` over every event file in ``folder``."""
    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for f in sorted(Path(folder).glob("events.out.tfevents.*")):
        data, i = f.read_bytes(), 0
        while i + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            i += 12  # length, length CRC
            event = event_pb2.Event()
            event.ParseFromString(data[i:i + n])
            i += n + 4  # record, record CRC
            for v in event.summary.value:
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out
