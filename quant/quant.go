package quant

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Result is what Plan makes of a checkpoint's stored tensors.
type Result struct {
	Scheme   string    // the checkpoint's scheme ("fp8-block", "mxfp4", ...); "" when nothing is quantized
	Weights  []Weight  // logical weights, sorted by Name
	Hidden   []string  // stored names the converted views must not list, sorted
	Problems []Problem // weights left out of the views, sorted by Name
}

// Weight returns the logical weight named name, nil when there is none.
func (r *Result) Weight(name string) *Weight {
	i, ok := slices.BinarySearchFunc(r.Weights, name, func(w Weight, n string) int { return strings.Compare(w.Name, n) })
	if !ok {
		return nil
	}
	return &r.Weights[i]
}

// IsHidden reports whether a stored name is left out of the converted views.
func (r *Result) IsHidden(name string) bool {
	_, ok := slices.BinarySearch(r.Hidden, name)
	return ok
}

// Problem is a weight left out of the converted views and why (one line,
// no file name: the caller adds where the checkpoint is).
type Problem struct {
	Name string
	Why  string
}

func (p Problem) String() string { return p.Name + ": " + p.Why }

// Weight is one logical weight computed from stored parts.
type Weight struct {
	Name   string  // the unquantized model's name
	Shape  []int64 // logical shape
	Scheme string
	Parts  []string // stored tensors it is computed from, in the order Dequantize's read indexes them

	rows, cols int64 // the shape as a matrix: cols is the last dimension
	kern       kernel
}

// NumElements is the product of Shape.
func (w *Weight) NumElements() int64 { return w.rows * w.cols }

// ReadFunc reads exactly len(p) bytes at byte offset off of part k's
// stored row-major bytes.
type ReadFunc func(part int, off int64, p []byte) error

// kernel computes a rectangle of the weight seen as a rows×cols matrix:
// rows [r0, r1), columns [c0, c1), row-major into dst (len (r1-r0)*(c1-c0)).
// Dequantize only asks for one row (r1 == r0+1) or whole rows (c0 == 0,
// c1 == cols), so the rectangle is a contiguous run of the logical tensor.
type kernel interface {
	rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error
}

// maxTile bounds the elements of one kernel call, and so the scratch it
// reads packed data into (at most a few bytes per element).
const maxTile = 1 << 20

// ErrRange is returned for a read outside the weight.
var ErrRange = errors.New("quant: range outside the weight")

// Dequantize writes the float32 values of logical elements
// [first, first+len(dst)) (row-major) of w. It reads stored bytes of part
// k with read(k, off, p). Its memory is dst plus scratch bounded by
// min(len(dst), 1<<20) elements' packed bytes.
func (w *Weight) Dequantize(read func(part int, off int64, p []byte) error, first int64, dst []float32) error {
	n := w.NumElements()
	if first < 0 || first > n || int64(len(dst)) > n-first {
		return fmt.Errorf("%s: elements [%d, %d) outside its %d: %w", w.Name, first, first+int64(len(dst)), n, ErrRange)
	}
	if len(dst) == 0 {
		return nil
	}
	s := scratchPool.Get().(*scratch)
	*s = scratch{read: read, parts: len(w.Parts), bufs: s.bufs, flts: s.flts, nv: s.nv, tbls: s.tbls}
	defer func() {
		s.read = nil
		scratchPool.Put(s)
	}()
	p, out := first, dst
	for len(out) > 0 {
		r, c := p/w.cols, p%w.cols
		left := int64(len(out))
		var r1, c1 int64
		if c != 0 || left < w.cols || w.cols > maxTile {
			r1, c1 = r+1, min(w.cols, c+left, c+maxTile)
		} else {
			r1, c1 = r+min(left/w.cols, maxTile/w.cols), w.cols
		}
		m := (r1 - r) * (c1 - c)
		if err := w.kern.rect(s, r, r1, c, c1, out[:m]); err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		out, p = out[m:], p+m
	}
	return nil
}

// scratchPool keeps scratch buffers between Dequantize calls (at most a
// tile's worth each).
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// scratch holds one Dequantize call's buffers, reused across its tiles.
type scratch struct {
	read  ReadFunc
	parts int
	bufs  [8][]byte
	flts  [8][]float32
	gl    map[int]float32 // scalar parts read once per call
	// checked is set once a kernel has checked a part's stored shape
	// values against the plan.
	checked bool
	// nv is NVFP4's table of every scale byte's values for global scale
	// nvG (nvfp4.go), kept with the pooled scratch.
	nv    *[256][16]float32
	nvG   float32
	nvDiv bool
	nvOK  bool          // nv holds nvG's table (false at the start of each call)
	tbls  [][16]float32 // group tables (scratch.tables)
}

// bytes reads n bytes at off of part into buffer slot.
func (s *scratch) bytes(slot, part int, off, n int64) ([]byte, error) {
	if part < 0 || part >= s.parts {
		return nil, fmt.Errorf("part %d of %d", part, s.parts)
	}
	b := s.bufs[slot]
	if int64(cap(b)) < n {
		b = make([]byte, n)
	}
	b = b[:n]
	s.bufs[slot] = b
	if n == 0 {
		return b, nil
	}
	if err := s.read(part, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

// strided reads rows [a, b) of a part seen as a matrix of rowBytes-byte
// rows, bytes [x0, x1) of each, into slot: one read when the rows are
// whole, one per row otherwise. The result holds (b-a)*(x1-x0) bytes.
func (s *scratch) strided(slot, part int, rowBytes, a, b, x0, x1 int64) ([]byte, error) {
	if x0 == 0 && x1 == rowBytes {
		return s.bytes(slot, part, a*rowBytes, (b-a)*rowBytes)
	}
	w := x1 - x0
	buf := s.bufs[slot]
	if int64(cap(buf)) < (b-a)*w {
		buf = make([]byte, (b-a)*w)
	}
	buf = buf[:(b-a)*w]
	s.bufs[slot] = buf
	for r := a; r < b; r++ {
		if err := s.read(part, r*rowBytes+x0, buf[(r-a)*w:(r-a+1)*w]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// floats reads n elements of a float part (F32, F16, BF16, F8 scales) from
// element first, decoded to float32 (exactly: every such value is a float32).
func (s *scratch) floats(slot, part int, dt dtype.DType, first, n int64) ([]float32, error) {
	es := dt.ElemSize()
	b, err := s.bytes(slot, part, first*es, n*es)
	if err != nil {
		return nil, err
	}
	return s.decode(slot, dt, b, n)
}

// stridedFloats is strided for a float part of cols elements a row.
func (s *scratch) stridedFloats(slot, part int, dt dtype.DType, cols, a, b, x0, x1 int64) ([]float32, error) {
	es := dt.ElemSize()
	raw, err := s.strided(slot, part, cols*es, a, b, x0*es, x1*es)
	if err != nil {
		return nil, err
	}
	return s.decode(slot, dt, raw, (b-a)*(x1-x0))
}

func (s *scratch) decode(slot int, dt dtype.DType, b []byte, n int64) ([]float32, error) {
	f := s.flts[slot]
	if int64(cap(f)) < n {
		f = make([]float32, n)
	}
	f = f[:n]
	s.flts[slot] = f
	if n == 0 {
		return f, nil
	}
	conv, ok := dtype.ConverterFor(dt, dtype.F32)
	if !ok {
		return nil, fmt.Errorf("no float32 decoding of %s", dt)
	}
	conv(unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*n), b)
	return f, nil
}

// scalar reads a part holding one float value (a global scale), once per call.
func (s *scratch) scalar(part int, dt dtype.DType) (float32, error) {
	if v, ok := s.gl[part]; ok {
		return v, nil
	}
	f, err := s.floats(7, part, dt, 0, 1)
	if err != nil {
		return 0, err
	}
	if s.gl == nil {
		s.gl = map[int]float32{}
	}
	s.gl[part] = f[0]
	return f[0], nil
}

// le32 reads the little-endian 32-bit word i of b.
// useLookup sends whole groups through dtype.Lookup4 / Plane4 (each
// group's 16 values made first, by the scheme's own operations); off, every
// kernel takes its per-element loop. Tests run both (TestPlainLoops).
var useLookup = true

// tables returns n group tables from the scratch (their values are the
// caller's to set).
func (s *scratch) tables(n int64) [][16]float32 {
	if int64(cap(s.tbls)) < n {
		s.tbls = make([][16]float32, n)
	}
	return s.tbls[:n]
}

// wordsOf views whole 4-byte words of b as uint32s in the machine's order:
// for copying words, never for reading their values (le32 does that).
func wordsOf(b []byte) []uint32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func le32(b []byte, i int64) uint32 {
	b = b[4*i : 4*i+4]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// table decodes every byte of a one-byte float dtype to float32.
func table(dt dtype.DType) *[256]float32 {
	var src [256]byte
	for i := range src {
		src[i] = byte(i)
	}
	var t [256]float32
	conv, ok := dtype.ConverterFor(dt, dtype.F32)
	if !ok {
		panic("quant: no float32 decoding of " + dt.String())
	}
	conv(unsafe.Slice((*byte)(unsafe.Pointer(&t[0])), 1024), src[:])
	return &t
}

var (
	e4m3Table = table(dtype.F8E4M3)
	// fp4Values is E2M1: code k (sign bit 8) to its value; code 8 is -0
	// (a Go constant -0. is +0, so it is set by Copysign).
	fp4Values = [16]float32{0, .5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -.5, -1, -1.5, -2, -3, -4, -6}
)

// Plan joins stored tensors into logical weights by cfg's scheme (cfg nil:
// only the unambiguous pairs). small reads the whole bytes of a small
// stored tensor (the schemes that keep parameters in tensor data:
// bitsandbytes' quant_state JSON, compressed-tensors' weight_shape); it is
// called only for tensors of at most MaxSmall bytes, and may be nil, in
// which case the weights that need it are Problems.
func Plan(cfg *Config, tensors []index.Tensor, small func(name string) ([]byte, error)) *Result {
	p := newPlanner(cfg, tensors, small)
	p.run()
	return p.result()
}

// MaxSmall is the largest tensor Plan asks small for.
const MaxSmall = 1 << 16

type planner struct {
	cfg     *Config
	byName  map[string]*index.Tensor
	names   []string // sorted
	small   func(string) ([]byte, error)
	scheme  string
	weights map[string]*Weight
	hidden  map[string]bool
	probs   map[string]string
	// u8E8M0: a U8 scale of an FP8 weight is E8M0 exponent bytes (MXFP8)
	u8E8M0 bool
	// fpqTables: FP-Quant's tables by the rotation's bytes (fpquant.go)
	fpqTables map[string]*[16][256][8]uint64
}

func newPlanner(cfg *Config, tensors []index.Tensor, small func(string) ([]byte, error)) *planner {
	p := &planner{cfg: cfg, byName: map[string]*index.Tensor{}, small: small,
		weights: map[string]*Weight{}, hidden: map[string]bool{}, probs: map[string]string{}}
	for i := range tensors {
		t := &tensors[i]
		if _, dup := p.byName[t.Name]; !dup {
			p.names = append(p.names, t.Name)
		}
		p.byName[t.Name] = t
	}
	sort.Strings(p.names)
	return p
}

func (p *planner) run() {
	if p.cfg == nil {
		planPairs(p)
		return
	}
	for _, sc := range schemes {
		if sc.method == p.cfg.Method {
			p.scheme = sc.name
			sc.plan(p)
			p.hideCacheScales()
			p.looseF4() // f4codes.go
			return
		}
	}
	p.scheme = "unknown"
	p.refuseAll(fmt.Sprintf("quantization method %q (%s) is not supported: no weight is dequantized", p.cfg.Method, p.cfg.File))
}

// cacheScales are the scales a quantized checkpoint keeps for its
// attention's KV cache and activations (ModelOpt, compressed-tensors,
// fp8 with kv_cache_scheme): not weights of the unquantized model.
var cacheScales = []string{".k_scale", ".v_scale", ".q_scale", ".kv_scale", ".prob_scale"}

// hideCacheScales hides the KV-cache scales of a quantized checkpoint.
func (p *planner) hideCacheScales() {
	for _, nm := range p.names {
		if _, ok := cutPart(nm, cacheScales...); ok && isScalar(p.t(nm)) && isScaleDType(p.t(nm).DType) {
			p.hidden[nm] = true
		}
	}
}

func (p *planner) result() *Result {
	r := &Result{}
	if len(p.weights) > 0 || len(p.probs) > 0 {
		r.Scheme = p.scheme
	}
	for _, w := range p.weights {
		r.Weights = append(r.Weights, *w)
	}
	sort.Slice(r.Weights, func(i, j int) bool { return r.Weights[i].Name < r.Weights[j].Name })
	for n := range p.hidden {
		if _, ok := p.weights[n]; !ok {
			r.Hidden = append(r.Hidden, n)
		}
	}
	sort.Strings(r.Hidden)
	for n, why := range p.probs {
		r.Problems = append(r.Problems, Problem{n, why})
	}
	sort.Slice(r.Problems, func(i, j int) bool { return r.Problems[i].Name < r.Problems[j].Name })
	return r
}

// t returns the stored tensor name, nil when absent.
func (p *planner) t(name string) *index.Tensor { return p.byName[name] }

// planned reports whether the weight name is already planned: served
// (weights) or named unusable (probs).
func (p *planner) planned(name string) bool {
	_, w := p.weights[name]
	_, f := p.probs[name]
	return w || f
}

// add records a weight; parts are hidden unless one is the weight's own name.
func (p *planner) add(name, scheme string, shape []int64, parts []string, k kernel, hide ...string) {
	if !dimsOK(shape) {
		p.fail(name, fmt.Sprintf("its logical shape %v is too large", shape), append(parts, hide...)...)
		return
	}
	rows := int64(1)
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	p.weights[name] = &Weight{Name: name, Shape: shape, Scheme: scheme, Parts: parts,
		rows: rows, cols: shape[len(shape)-1], kern: k}
	for _, h := range append(parts, hide...) {
		if p.byName[h] != nil {
			p.hidden[h] = true
		}
	}
}

// fail records a broken weight and hides its stored parts that exist.
func (p *planner) fail(name, why string, parts ...string) {
	if _, ok := p.probs[name]; !ok {
		p.probs[name] = why // the first reason found
	}
	delete(p.weights, name)
	for _, h := range parts {
		if p.byName[h] != nil {
			p.hidden[h] = true
		}
	}
}

// readSmall returns a small tensor's bytes.
func (p *planner) readSmall(name string) ([]byte, error) {
	t := p.byName[name]
	if t == nil {
		return nil, fmt.Errorf("%s is missing", name)
	}
	if p.small == nil {
		return nil, fmt.Errorf("%s was not read (no reader for small tensors)", name)
	}
	if t.Size > MaxSmall {
		return nil, fmt.Errorf("%s is %d bytes, over %d", name, t.Size, MaxSmall)
	}
	b, err := p.small(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if int64(len(b)) != t.Size {
		return nil, fmt.Errorf("%s: read %d bytes of %d", name, len(b), t.Size)
	}
	return b, nil
}

// shapeIs reports whether t has exactly shape want.
func shapeIs(t *index.Tensor, want ...int64) bool {
	if len(t.Shape) != len(want) {
		return false
	}
	for i := range want {
		if t.Shape[i] != want[i] {
			return false
		}
	}
	return true
}

func shapeStr(s []int64) string { return fmt.Sprint(s) }

// isScalar reports whether t holds one element (shape [], [1] or [1, 1]).
func isScalar(t *index.Tensor) bool {
	for _, d := range t.Shape {
		if d != 1 {
			return false
		}
	}
	return true
}

// isFloat16or32 reports whether a scale part's dtype is one the kernels decode.
func isScaleDType(d dtype.DType) bool {
	return d == dtype.F32 || d == dtype.BF16 || d == dtype.F16
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// maxDim bounds every dimension Plan accepts, so that products of a few
// dimensions cannot overflow int64.
const maxDim = 1 << 40

func dimsOK(s []int64) bool {
	n := int64(1)
	for _, d := range s {
		if d <= 0 || d > maxDim {
			return false
		}
		if n > (1<<62)/d {
			return false
		}
		n *= d
	}
	return true
}

// gather reads, of a part seen as rows of rowElems elements of es bytes,
// rows [a, b) at the sorted distinct columns cols, into slot as
// [(b-a) × len(cols)] elements: one read a row when the columns span
// little more than they count, else one read an element. Its memory is
// bounded by the elements returned, whatever the columns' span.
func (s *scratch) gather(slot, part int, es, rowElems, a, b int64, cols []int64) ([]byte, error) {
	n := int64(len(cols))
	c0, c1 := cols[0], cols[n-1]+1
	if c1-c0 <= 2*n+16 {
		raw, err := s.strided(slot, part, rowElems*es, a, b, c0*es, c1*es)
		if err != nil || c1-c0 == n {
			return raw, err
		}
		span := (c1 - c0) * es
		// compact in place: element j of a row moves left, never past
		// what is still to be read
		out := raw[:0]
		for r := int64(0); r < b-a; r++ {
			row := raw[r*span : (r+1)*span]
			for _, c := range cols {
				out = append(out, row[(c-c0)*es:(c-c0+1)*es]...)
			}
		}
		return out, nil
	}
	buf := s.bufs[slot]
	if int64(cap(buf)) < (b-a)*n*es {
		buf = make([]byte, (b-a)*n*es)
	}
	buf = buf[:(b-a)*n*es]
	s.bufs[slot] = buf
	for r := a; r < b; r++ {
		for j, c := range cols {
			at := ((r-a)*n + int64(j)) * es
			if err := s.read(part, r*rowElems*es+c*es, buf[at:at+es]); err != nil {
				return nil, err
			}
		}
	}
	return buf, nil
}

// groupsOf returns the sorted distinct groups of a tile's columns and each
// column's position among them; idx holds each column's group (nil: the
// column c0+i is in group (c0+i)/size).
func groupsOf(idx []int32, c0, c1, size int64) (groups []int64, pos []int32) {
	pos = make([]int32, c1-c0)
	if idx == nil {
		g0 := c0 / size
		for c := c0; c < c1; c++ {
			pos[c-c0] = int32(c/size - g0)
		}
		for g := g0; g <= (c1-1)/size; g++ {
			groups = append(groups, g)
		}
		return groups, pos
	}
	if maxg := slices.Max(idx); maxg >= 0 && int64(maxg) < 4*int64(len(idx)) {
		// dense: a rank per group number, no sort (idx is validated,
		// so its groups are at least 0)
		rank := make([]int32, maxg+1)
		for _, g := range idx {
			rank[g] = 1
		}
		for g, seen := range rank {
			if seen != 0 {
				rank[g] = int32(len(groups))
				groups = append(groups, int64(g))
			}
		}
		for i, g := range idx {
			pos[i] = rank[g]
		}
		return groups, pos
	}
	groups = make([]int64, 0, len(idx))
	for _, g := range idx {
		groups = append(groups, int64(g))
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	for i, g := range idx {
		j, _ := slices.BinarySearch(groups, int64(g))
		pos[i] = int32(j)
	}
	return groups, pos
}

// decodeRun writes out[cc-c] = tbl[code cc] for the columns [c, e) of a
// row of packed words (32/bits codes a word, LSB first, bits <= 4;
// words[0] is the row's word p0): whole words eight or sixteen codes at a
// time, with no bounds check on the table (a code is at most 15).
func decodeRun(words []byte, p0, c, e int64, bits uint, tbl *[16]float32, out []float32) {
	f := int64(32 / bits)
	mask := uint32(1)<<bits - 1
	cc := c
	for ; cc < e && cc%f != 0; cc++ {
		out[cc-c] = tbl[(le32(words, cc/f-p0)>>(bits*uint(cc%f)))&mask&15]
	}
	for ; cc+f <= e; cc += f {
		word := le32(words, cc/f-p0)
		o := out[cc-c : cc-c+f]
		for j := range o {
			o[j] = tbl[word&mask&15]
			word >>= bits
		}
	}
	for ; cc < e; cc++ {
		out[cc-c] = tbl[(le32(words, cc/f-p0)>>(bits*uint(cc%f)))&mask&15]
	}
}

// codeDTypes are the float dtypes that hold a quantized weight's codes:
// read as plain floats they are the codes' values, not the weight's.
func isCodeDType(d dtype.DType) bool {
	return d == dtype.F8E4M3 || d == dtype.F8E5M2 || d == dtype.F8E8M0 || d == dtype.F8E4M3FNUZ || d == dtype.F8E5M2FNUZ || d == dtype.F4
}

// partSuffixes are the stored parts of a quantized weight, each scheme's,
// by the suffix that follows the module's name (X.weight_scale_inv: part
// of X.weight) or the weight's (P_blocks: part of P); input is true for an
// activation's parameter, which belongs to no weight.
var partSuffixes = []struct {
	suffix string
	weight string // what replaces the suffix to name the weight
	input  bool
}{
	{".weight_scale_inv", ".weight", false}, {".weight_scale_2", ".weight", false}, {".weight_scale", ".weight", false},
	{".weight_global_scale", ".weight", false}, {".weight_zero_point", ".weight", false}, {".weight_g_idx", ".weight", false},
	{".weight_shape", ".weight", false}, {".weight_packed", ".weight", false},
	{".qweight", ".weight", false}, {".qzeros", ".weight", false}, {".scales", ".weight", false}, {".g_idx", ".weight", false},
	{"_blocks", "", false}, {"_scales", "", false}, {".SCB", ".weight", false}, {".absmax", "", false},
	{"_weight_scale_2", "", false}, {"_weight_scale", "", false}, {"_input_scale", "", true}, {".scaled_zeros", ".weight", false},
	{".input_scale", "", true}, {".input_global_scale", "", true}, {".input_zero_point", "", true}, {".input_scale_ub", "", true},
}

// refuseAll is the plan of a checkpoint whose scheme cannot be applied at
// all (a method tensorfs does not know, or a parameter of the checkpoint
// it cannot use): no weight is dequantized, and none is served as its
// codes either. Each weight the tensors show (a tensor of codes, F8 or F4,
// under its own name; a module with a known part such as weight_packed,
// qweight or weight_scale_inv) is a Problem saying why, its parts hidden;
// only when no weight shows is the checkpoint itself the Problem.
func (p *planner) refuseAll(why string) {
	for _, nm := range p.names {
		t := p.t(nm)
		if isCodeDType(t.DType) {
			w := nm
			if x, ok := strings.CutSuffix(nm, ".scale"); ok && t.DType == dtype.F8E8M0 {
				w = x + ".weight" // DeepSeek-V4's scale
			}
			if wt := p.t(w); wt != nil && wt != t && !isCodeDType(wt.DType) && (wt.DType.IsFloatView()) {
				p.hidden[nm] = true // a float weight beside it: served as stored
				continue
			}
			p.fail(w, why, nm, w)
			continue
		}
		for _, ps := range partSuffixes {
			x, ok := strings.CutSuffix(nm, ps.suffix)
			if !ok || x == "" {
				continue
			}
			p.hidden[nm] = true
			if ps.input {
				break
			}
			w := x + ps.weight
			if wt := p.t(w); wt != nil && wt.DType.IsFloatView() {
				break // a plain float weight: served as stored
			}
			p.fail(w, why, nm, w)
			break
		}
	}
	if len(p.probs) == 0 {
		p.probs["(checkpoint)"] = why
	}
}
