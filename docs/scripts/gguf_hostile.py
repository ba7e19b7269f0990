#!/usr/bin/env python3
"""Writes the GGUF files of docs/RELIABILITY.md, "GGUF metadata".

    docs/scripts/gguf_hostile.py bigmeta OUT N [--sparse]
    docs/scripts/gguf_hostile.py splitcount OUT_DIR

bigmeta: a GGUF v3 file whose metadata is general.architecture and "big",
a u8 array of N elements (written, or with --sparse a hole: a 16 GiB file
costs no disk), then one F32 tensor "t" of 4 elements.
splitcount: OUT_DIR/split-00001-of-2147483647.gguf, 144 bytes, with
split.no 0 and split.count 2^31-1 (u32). Standard library only.
"""
import struct
import sys


def s(b):
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, payload):
    return s(key) + struct.pack("<I", typ) + payload


def bigmeta(out, n, sparse):
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 2) + kv(b"general.architecture", 8, s(b"llama"))
    head += s(b"big") + struct.pack("<IIQ", 9, 0, n)
    with open(out, "wb") as f:
        f.write(head)
        if sparse:
            f.seek(n, 1)
        else:
            block = bytes(range(256)) * 4096
            for i in range(0, n, len(block)):
                f.write(block[: min(len(block), n - i)])
        tail = s(b"t") + struct.pack("<IQIQ", 1, 4, 0, 0)
        end = len(head) + n + len(tail)
        f.write(tail + b"\0" * ((32 - end % 32) % 32) + b"\1" * 16)


def splitcount(out_dir):
    b = b"GGUF" + struct.pack("<IQQ", 3, 1, 2)
    b += kv(b"split.no", 4, struct.pack("<I", 0)) + kv(b"split.count", 4, struct.pack("<I", 2**31 - 1))
    b += s(b"t") + struct.pack("<IQIQ", 1, 4, 0, 0)
    b += b"\0" * ((32 - len(b) % 32) % 32) + b"\1" * 16
    with open(out_dir + "/split-00001-of-2147483647.gguf", "wb") as f:
        f.write(b)


if sys.argv[1] == "bigmeta":
    bigmeta(sys.argv[2], int(sys.argv[3]), "--sparse" in sys.argv[4:])
else:
    splitcount(sys.argv[2])
