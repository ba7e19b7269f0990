package quant

// TorchAOVariants returns every generated torchao checkpoint
// (torchao_test.go), as TestTorchAO makes it, for the tests that read it
// through the loader (torchao_member_test.go).
func TorchAOVariants() []VariantCase {
	var out []VariantCase
	for k, v := range aoCases {
		c := makeAO(k)
		out = append(out, VariantCase{Name: v.name, Scheme: v.scheme, Safetensors: c.file(), Files: c.b.files, Want: c.want})
	}
	return out
}
