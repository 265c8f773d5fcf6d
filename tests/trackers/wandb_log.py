"""Reads a W&B offline run back: its transaction log (run-ID.wandb), as the
SDK's own sync reads it, into the wandb_internal_pb2.Record messages the SDK
wrote (history rows, summary updates). The SDK since 0.20 keeps its reader in
its Go core, so the framing is read here: a 7-byte header (":W&B", magic 0xBEE1,
version 0), then LevelDB log blocks of 32 KiB, each record a 7-byte header (CRC-32,
length, type: 1 full, 2 first, 3 middle, 4 last) and its bytes.
"""
import struct
import zlib

from wandb.proto import wandb_internal_pb2

_BLOCK = 32768
_HEADER = 7


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError(f"{path}: not a W&B transaction log")
    pos, pending = 7, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left  # the block's trailer
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        body = data[pos + _HEADER:pos + _HEADER + length]
        if length == 0 and kind == 0:
            pos += left  # zero padding to the end of the block
            continue
        if zlib.crc32(bytes([kind]) + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"{path}: bad checksum at byte {pos}")
        pos += _HEADER + length
        pending = body if kind in (1, 2) else pending + body
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""
