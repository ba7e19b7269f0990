package backing

// ForParsing returns what a parser should read s through while s is
// validated. A mapped source is read with pread(2) on its own descriptor
// instead of through the mapping: parsers read headers scattered through
// the file (a zip's local header before every member), and through a
// mapping the kernel maps the cached pages around each fault too, so a
// checkpoint of many small tensors would sit whole in the server's
// resident set before a single tensor was read. Other sources are
// returned as they are. The view shares s's descriptor, faults and
// Close; Unwrap gives s back for serving.
func ForParsing(s Source) Source {
	if m, ok := s.(*mmapFile); ok {
		return &parsingView{preadFile: preadFile{file: m.file}, src: m}
	}
	return s
}

// Unwrap returns the source a ForParsing view reads, or s itself.
func Unwrap(s Source) Source {
	if p, ok := s.(*parsingView); ok {
		return p.src
	}
	return s
}

// parsingView reads a mapped source with pread.
type parsingView struct {
	preadFile
	src Source
}

var (
	_ Source   = (*parsingView)(nil)
	_ FdSource = (*parsingView)(nil)
)

// Close closes the source (and unmaps it).
func (p *parsingView) Close() error { return p.src.Close() }
