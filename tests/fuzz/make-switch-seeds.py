#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the seed corpus of fuzz-switch-link (tests/fuzz/corpus/switch-link):
# byte 0 picks the read size, then a link byte stream (arctic/link.h,
# arctic/packet.h).  Rerun after a change of the link protocol.
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "corpus", "switch-link")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def frame(ftype, body):
    return struct.pack("<HHI", ftype, 0, len(body)) + body


def hello(node, low=8, high=8, magic=0x4C435241, major=1):
    return frame(1, struct.pack("<IHHIHH", magic, major, 0, node, low, high))


def packet(src, dst, high, seq, words):
    hops = 0 if src == dst else (src ^ dst).bit_length() - 1
    up = (hops << 10) | (src & ((1 << hops) - 1))
    w0 = up | (1 << 14) | (int(high) << 15)
    down = dst & ((2 << hops) - 1)
    length = 4 + words
    w1 = (down << 16) | (5 << 6) | length
    body = struct.pack("<BBHHHII", 1, int(high), src, dst, 7, 1, seq)
    body += struct.pack("<II", w0, w1) + struct.pack("<II", 0xC0DE0000 | src,
                                                     dst)
    body += b"".join(struct.pack("<I", seq ^ i) for i in range(words))
    return frame(4, body + struct.pack("<I", crc32c(body)))


def credit(low, high):
    return frame(5, struct.pack("<HH", low, high))


SEEDS = {
    "hello-only": bytes([7]) + hello(0),
    "hello-packets": bytes([13]) + hello(0) + b"".join(
        packet(0, 1, i & 1, i, i % 21) for i in range(6)) + credit(2, 2),
    "hello-self-and-down": bytes([64]) + hello(2) + packet(2, 2, 0, 1, 3) +
    packet(2, 3, 1, 2, 0),
    "bad-version": bytes([5]) + hello(0, major=9),
    "busy-node": bytes([9]) + hello(1),
    "bad-frame": bytes([1]) + hello(0) + frame(77, b"\0\0\0\0"),
    "overrun": bytes([40]) + hello(3) + b"".join(
        packet(3, 1, 0, i, 20) for i in range(12)),
}

os.makedirs(HERE, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
