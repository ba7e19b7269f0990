package index

// Named caps. Every length, count and size read from a file is checked
// against these and against the bytes the file really has before anything
// is allocated.
const (
	MaxSafetensorsHeader = 100_000_000 // the reference implementation's cap
	MaxDims              = 64          // dims of one tensor (GGUF: 4)
	MaxNameLength        = 64 << 10    // bytes of one tensor name
	MaxTensors           = 10_000_000  // tensors in one checkpoint
	MaxNesting           = 256         // container nesting depth (pickle, JSON, GGUF arrays)
	MaxShards            = 100_000     // files in one sharded checkpoint
	MaxIndexJSON         = 64 << 20    // bytes of a *.index.json weight map
)
