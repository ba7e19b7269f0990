package formats

import "strings"

// Family is a format as users know it: the name that help text, the
// README and docs/FORMATS.md give it. A family is read through rows of
// Table (Rows, by Name: NumPy is two rows, .npy and .npz) or, for the
// checkpoints that are directories (a distributed checkpoint, a sharded
// Hugging Face checkpoint), by Load itself (no rows).
type Family struct {
	Title  string   // the name every list of formats uses, e.g. "PaddlePaddle"
	Detail string   // what is read, for a sentence: "PaddlePaddle .pdparams/.pdopt"
	Rows   []string // the Table rows that read it; nil for a directory layout
}

// Families are the formats tensorfs reads, in the order lists of them
// give. Every row of Table is in exactly one family (TestFamilies), and
// the help text is made from this list (List), so a format added to the
// table is named everywhere a user looks; a test in cmd/tensorfs holds
// the README and docs/FORMATS.md to it.
var Families = []Family{
	{"safetensors", "safetensors", []string{"safetensors"}},
	{"PyTorch", "PyTorch torch.save files (zip and legacy)", []string{"pytorch"}},
	{"PyTorch Distributed Checkpoints", "PyTorch Distributed Checkpoints (directories of .metadata and *.distcp)", nil},
	{"GGUF", "GGUF (split files too)", []string{"gguf"}},
	{"NumPy", "NumPy .npy and .npz", []string{"numpy", "npz"}},
	{"PaddlePaddle", "PaddlePaddle .pdparams/.pdopt", []string{"paddle"}},
	{"ONNX", "ONNX models (initializers inline or in external data files)", []string{"onnx"}},
	{"Keras 3", "Keras 3 .weights.h5 and .keras files (HDF5)", []string{"hdf5", "keras"}},
	{"sharded Hugging Face checkpoints", "sharded Hugging Face checkpoints (a *.index.json weight map, or shard files of one format)", nil},
}

// List is the families' titles as a list for a sentence: "safetensors,
// PyTorch, ... and sharded Hugging Face checkpoints".
func List() string { return join(func(f Family) string { return f.Title }) }

// DetailList is List with each family's Detail.
func DetailList() string { return join(func(f Family) string { return f.Detail }) }

func join(s func(Family) string) string {
	parts := make([]string, len(Families))
	for i, f := range Families {
		parts[i] = s(f)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
