package quant

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
)

// VariantCase is a generated variant (variants_test.go) as the files of a
// checkpoint directory, for the tests outside the package that read it
// through the loader (member_test.go).
type VariantCase struct {
	Name, Scheme string
	Safetensors  []byte               // model.safetensors
	Files        map[string][]byte    // config.json...
	Want         map[string][]float32 // each logical weight's values
}

// Variants returns every generated variant, made as TestVariants makes it.
func Variants() []VariantCase {
	var out []VariantCase
	for k, v := range variants {
		b, want := v.make(rand.New(rand.NewPCG(20261128, uint64(k))))
		out = append(out, VariantCase{Name: v.name, Scheme: v.scheme, Safetensors: b.file(), Files: b.files, Want: want})
	}
	return out
}

// file is the safetensors file build parses.
func (b *builder) file() []byte {
	hdr := map[string]any{}
	var blob []byte
	for _, n := range b.order {
		e := b.tensors[n]
		hdr[n] = map[string]any{"dtype": e.dt, "shape": e.shape, "data_offsets": []int{len(blob), len(blob) + len(e.data)}}
		blob = append(blob, e.data...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(file, h...), blob...)
}
