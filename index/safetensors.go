package index

// STUB: replaced by the safetensors parser.

func sniffSafetensors(head []byte) bool { return false }

func parseSafetensors(f File) (*Index, error) {
	return nil, ErrorAt(f.Name(), "", "safetensors: not implemented yet")
}
