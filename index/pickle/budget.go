package pickle

import (
	"fmt"
	"math"
)

// Caps of the machine. Every length read from the stream is checked
// against the bytes the stream really has left before anything is
// allocated; these bound what a short stream can still ask for.
const (
	MaxStack   = 1 << 20 // values on the stack at once
	MaxNesting = 256     // MARKs open at once
	MaxLine    = 1 << 16 // bytes of one text-opcode line (protocol 0)
	MaxLong    = 1 << 16 // bytes of one LONG1/LONG4 integer
	// MaxIntDigits caps a decimal integer (INT, LONG): Python's own
	// limit (sys.int_info.default_max_str_digits), as decimal parsing
	// takes time quadratic in the digits.
	MaxIntDigits = 4300
	// MaxPickle caps a pickle that has to be held in memory (a
	// compressed data.pkl member: torch never writes one).
	MaxPickle = 64 << 20
	// MaxValue caps one str/bytes value kept in memory; a longer one (a
	// blob a checkpoint carries along) is skipped over and stands as a
	// Large, so memory never follows the size of such values.
	MaxValue = 16 << 20
)

// Budgets that follow the stream's size. A pickle can name one value
// many times for two bytes each (memo GET, DUP), and a value can hold
// itself shared twice, so n bytes can stand for 2^n paths: no cost
// derived from the values may count visits. Each budget below is a floor
// plus a multiple of the pickle's size, and counts what is produced
// (values copied, results, bytes of names and of metadata), so that cost
// follows the file. A pickle written by torch.save or pickle.dump stays
// far below each: every result costs it at least one byte, every name and
// metadata byte is in the stream once (shared references of tied weights
// or a shared config at most double that).
const (
	// WorkFloor and WorkPerByte bound the values and bytes an Env copies
	// (list(x), dict(x), bytes(s)): MaxWork.
	WorkFloor   = 1 << 20
	WorkPerByte = 16
	// ResultsFloor and ResultsPerByte bound the results a client derives
	// from the values: tensors and metadata values, one per path that
	// reaches them (a value shared k times is k results).
	ResultsFloor   = 1 << 16
	ResultsPerByte = 4
	// NameBytesFloor and NameBytesPerByte bound the bytes of all the
	// names a client builds (a tensor's name is its path of keys).
	NameBytesFloor   = 1 << 20
	NameBytesPerByte = 16
	// MetaBytesFloor and MetaBytesPerByte bound the bytes of metadata a
	// client renders (strings, keys and reprs, counted as stored).
	MetaBytesFloor   = 1 << 20
	MetaBytesPerByte = 8
	// MemoFloor and one entry per MemoBytesPerEntry bytes bound the
	// memo: pickle writes an object (at least one byte) before each
	// MEMOIZE or BINPUT, so a pickle of n bytes memoizes fewer than n/2
	// values; a flood of MEMOIZE opcodes cannot grow it past that.
	MemoFloor         = 1 << 16
	MemoBytesPerEntry = 2
	// TensorsFloor and one tensor per TensorBytesPerEntry bytes bound the
	// tensors a client derives: a tensor of a state dict costs its key
	// and at least a memo GET, and each costs the index far more than
	// its bytes of pickle (torch.save([t]*1000000), 2 MB, is a million
	// tensors).
	TensorsFloor        = 1 << 14
	TensorBytesPerEntry = 16
)

func scaled(floor, per, n int64) int64 {
	if n < 0 {
		n = 0
	}
	if n > (math.MaxInt64/2-floor)/per {
		return math.MaxInt64 / 2
	}
	return floor + per*n
}

// MaxWork is the copy budget of a stream of n bytes.
func MaxWork(n int64) int64 { return scaled(WorkFloor, WorkPerByte, n) }

// MaxResults is the result budget of a pickle of n bytes.
func MaxResults(n int64) int64 { return scaled(ResultsFloor, ResultsPerByte, n) }

// MaxNameBytes is the name budget of a pickle of n bytes.
func MaxNameBytes(n int64) int64 { return scaled(NameBytesFloor, NameBytesPerByte, n) }

// MaxMemo is the memo budget (entries) of a pickle of n bytes.
func MaxMemo(n int64) int64 { return MemoFloor + max(n, 0)/MemoBytesPerEntry }

// MaxTensors is the tensor budget of a pickle of n bytes.
func MaxTensors(n int64) int64 { return TensorsFloor + max(n, 0)/TensorBytesPerEntry }

// MaxMetaBytes is the metadata budget of a pickle of n bytes.
func MaxMetaBytes(n int64) int64 { return scaled(MetaBytesFloor, MetaBytesPerByte, n) }

// Budget is what a client may still derive from one pickle of Size
// bytes: it charges every result, name and metadata byte it produces and
// stops at the first error, which names the limit crossed. Size is the
// bytes the pickle costs in its file: for a compressed pickle, its
// compressed size (a few KB must not buy what megabytes would).
type Budget struct {
	Size                                   int64
	results, nameBytes, metaBytes, tensors int64 // left
}

// NewBudget returns the budget of a pickle of size bytes.
func NewBudget(size int64) *Budget {
	return &Budget{Size: size, results: MaxResults(size), nameBytes: MaxNameBytes(size), metaBytes: MaxMetaBytes(size), tensors: MaxTensors(size)}
}

// Tensors charges n tensors.
func (b *Budget) Tensors(n int64) error {
	return b.take(&b.tensors, n, "its tensors, counted once per path,", "pickle.MaxTensors", MaxTensors)
}

func (b *Budget) take(left *int64, n int64, what, limit string, max func(int64) int64) error {
	if n > *left {
		return fmt.Errorf("%s more than a %d-byte pickle allows (%s: %d; shared references multiply)", what, b.Size, limit, max(b.Size))
	}
	*left -= n
	return nil
}

// Results charges n results (tensors or metadata values).
func (b *Budget) Results(n int64) error {
	return b.take(&b.results, n, "its values, counted once per path, number", "pickle.MaxResults", MaxResults)
}

// NameBytes charges n bytes of names.
func (b *Budget) NameBytes(n int64) error {
	return b.take(&b.nameBytes, n, "the names built from its values take", "pickle.MaxNameBytes", MaxNameBytes)
}

// MetaBytes charges n bytes of metadata.
func (b *Budget) MetaBytes(n int64) error {
	return b.take(&b.metaBytes, n, "its metadata takes", "pickle.MaxMetaBytes", MaxMetaBytes)
}
