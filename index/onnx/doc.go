// Package onnx reads the initializers of an ONNX model (a protobuf
// ModelProto, onnx/onnx.proto) as tensors: a row of the format table in
// package formats (the model may name external data files beside it,
// opened through index.Env's Siblings).
//
// What is read: graph.initializer, the initializers of subgraphs (node
// attributes of type GRAPH and GRAPHS: If, Loop, Scan bodies, at any
// depth up to MaxDepth), of training_info's graphs, and of the graphs
// inside functions' nodes, each under its own name (a name found twice:
// the later one is listed in Unserved). A tensor's bytes are, in order of
// preference of the file:
//
//   - external data (data_location EXTERNAL; external_data "location",
//     "offset", "length"): a range of the file location names, opened
//     through the index.Opener, which confines it to the model's
//     directory. "length", when given, must equal what dims and data type
//     need. "checksum" (SHA-1 of the bytes in hex, optional in onnx.proto) is
//     the tensor's index.Check: not read at load (that would read every
//     byte), verified by whole reads (cat, load, convert, the client's
//     Stream and Fill, check --data) as a stored .npz member's CRC-32 is;
//     a partial read or a read through a mount serves the bytes as they
//     are. A checksum that is not 40 hex digits is a Note, the tensor
//     served unchecked.
//   - raw_data: a range of the model file itself, never read at load.
//   - a typed field (float_data, int32_data with FLOAT16/BFLOAT16/INT8/
//     UINT8/BOOL/FLOAT8 packing, int64_data, double_data, uint64_data):
//     decoded by a MethodDecode member on first read (through the inflate
//     cache's budgets), checked once at load; each such TensorProto at
//     most MaxTypedBytes, all of them together MaxTypedTotal.
//
// Listed as Unserved: sparse initializers, string tensors, segments,
// data types tensorfs has no dtype for (INT4, UINT4, INT2, UINT2),
// FLOAT4E2M1 in int32_data. Model metadata (ir_version, producer_name,
// producer_version, domain, model_version, opset_import as {domain:
// version}, metadata_props as {key: value}) is the Index's Metadata.
//
// # Invariants
//
//   - The protobuf wire format is decoded by google.golang.org/protobuf's
//     protowire; the walker reads fields by offset through a 64 KiB
//     window, so a 2 GB model.onnx with inline raw_data is walked, not
//     loaded. At most MaxFields fields, MaxDepth nested graphs,
//     index.MaxDims dims, strings of MaxString bytes.
//   - Every length is checked against its enclosing message before use;
//     element counts and byte sizes with checked arithmetic; external
//     ranges against the data file's size.
//   - Problems are one line (*index.FormatError) naming the file, the
//     initializer and the byte offset. Fuzz target: FuzzONNX.
package onnx
