package index

// Dequantized is a quantized weight read as its values: the row-major
// float32 bytes of a logical tensor (Member.Size = 4 × its elements),
// computed from stored parts by a scheme of package quant. Its Parts are
// the stored tensors' contiguous bytes, in the order Values' read
// indexes them; Names are those tensors' names. Member.File is the first
// part's source.
type Dequantized struct {
	Scheme string   // quant's scheme name: "fp8-block", "mxfp4", ...
	Shape  []int64  // the logical tensor's shape
	Parts  []Part   // each part's stored bytes
	Names  []string // each part's tensor name
	// Values writes the float32 values of logical elements [first,
	// first+len(dst)) of the weight, reading bytes [off, off+len(p)) of
	// part k through read (quant.Weight.Dequantize: the loader sets it;
	// index does not import quant).
	Values func(read func(part int, off int64, p []byte) error, first int64, dst []float32) error
}

func (*Dequantized) kind() {}

// Shifted returns a copy whose parts name their sources moved by n.
func (k *Dequantized) Shifted(n int) MemberKind {
	c := *k
	c.Parts = shiftParts(k.Parts, n)
	return &c
}

// Ranges is the parts' bytes.
func (k *Dequantized) Ranges(*Member) []Part { return k.Parts }

// Quantization is what the loader made of a quantized checkpoint
// (package quant): its scheme, where the scheme was found, each logical
// weight with its stored parts, and the weights left out of the
// converted views. nil for a checkpoint with nothing quantized.
type Quantization struct {
	Scheme  string        `json:"scheme"`           // "" when the configuration names a method that no tensor is stored by
	Config  string        `json:"config,omitempty"` // the file that named the scheme: "config.json"...; "" when found by the tensors alone
	Method  string        `json:"method,omitempty"` // the method it names ("fp8", "awq"...)
	Weights []QuantWeight `json:"weights"`
	// Hidden are the stored tensors left out of the converted views
	// that are no weight's part: a broken weight's, attention's
	// KV-cache scales. Every weight's parts and these are RolePart.
	Hidden   []string       `json:"hidden,omitempty"`
	Problems []QuantProblem `json:"problems,omitempty"`
}

// QuantWeight is one logical weight: its name and path, its shape (its
// dtype is F32 as computed; the views round it) and the stored tensors
// it is computed from.
type QuantWeight struct {
	Name  string   `json:"name"`
	Path  string   `json:"path"`
	Shape []int64  `json:"shape"`
	Parts []string `json:"parts"`
}

// QuantProblem is a weight left out of the converted views, and why (one
// line, no file name).
type QuantProblem struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// Twins reports whether two tensors of one name may both be in an index:
// a stored part and the logical tensor that keeps its name (block FP8's
// X.weight, read as its values), which no listing shows together
// (Listed).
func Twins(a, b *Tensor) bool {
	return a.Role == RolePart && b.Role == RoleLogical || a.Role == RoleLogical && b.Role == RolePart
}
