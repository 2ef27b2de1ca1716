#!/usr/bin/env python3
"""Makes one entry of a capture unreadable at read time (not at open time): its q dataset is rewritten
chunked with a Fletcher-32 checksum and one stored byte is flipped, so HDF5 fails the read.
usage: corrupt_entry.py CAPTURE ENTRY"""
import sys

import h5py
import numpy as np

path, entry = sys.argv[1], sys.argv[2]
with h5py.File(path, "r+") as f:
    g = f["entries"][entry]
    q = g["q"]
    data, attrs = q[...], dict(q.attrs)
    del g["q"]
    chunks = (1, 1) + data.shape[2:]
    q = g.create_dataset("q", data=data, chunks=chunks, fletcher32=True)
    for k, v in attrs.items():
        q.attrs[k] = v
    info = q.id.get_chunk_info(0)
    offset = info.byte_offset + info.size // 2
with open(path, "r+b") as f:
    f.seek(offset)
    b = f.read(1)
    f.seek(offset)
    f.write(bytes([b[0] ^ 0xFF]))
print(f"corrupted {path}:/entries/{entry}/q at byte {offset}")
