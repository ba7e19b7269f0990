#!/usr/bin/env python3
"""Writes the hostile inputs of docs/RELIABILITY.md "Round 6: parser costs"
(issue 41) with the standard library only:

  cost_inputs.py npz OUT.npz            one float32 array, 300,000 |S3 members (69 MB)
  cost_inputs.py onnx-nameless OUT.onnx 300,000 nameless initializers (600 KB)
  cost_inputs.py onnx-dup OUT.onnx      300,000 initializers named "w" (4.8 MB)
"""
import sys, zipfile, struct
def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data
def varint(n):
    out = b''
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out
def field(num, payload):  # a length-delimited protobuf field
    return varint(num << 3 | 2) + varint(len(payload)) + payload
kind, out = sys.argv[1], sys.argv[2]
if kind == 'npz':  # one float32 array, 300,000 '|S3' members
    with zipfile.ZipFile(out, 'w') as z:
        z.writestr('w.npy', npy('<f4', '(2,)', b'\0' * 8))
        s = npy('|S3', '()', b'abc')
        for i in range(300000):
            z.writestr('s%06d.npy' % i, s)
elif kind in ('onnx-nameless', 'onnx-dup'):  # ModelProto: ir_version 8, a graph of 300,000 initializers
    one = b'' if kind == 'onnx-nameless' else field(1, varint(1)) + b'\x10\x01' + field(8, b'w') + field(9, b'\0\0\x80\x3f')
    graph = field(5, one) * 300000
    open(out, 'wb').write(b'\x08\x08' + field(7, graph) + field(8, b'\x10\x11'))
