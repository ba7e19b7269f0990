package fs

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/lazyweights/tensorfs/index"
)

// .tensorfs/metadata/: one file per metadata key (its name by
// index.MetadataFileName), each served on demand, so that a mount holds no
// second copy of the metadata:
//
//   - a string: its bytes, read from the string itself;
//   - an *index.FileValue (a GGUF value over index.MaxInlineMetadata): its
//     bytes in the source file, read at each read like a tensor's;
//   - anything else: its JSON and a newline (index.MetadataValueJSON),
//     counted at mount without being kept, rendered on the first read and
//     kept from then on.
//
// A value whose JSON is over maxMetadataFile bytes, or that JSON cannot
// hold, has no file (one log line); nor has a key whose file name would be
// over 255 bytes. Both are still in index.json.

// kindLazy is a file read from its contents.r, set when the file is added
// (Root.read serves it as a view's tensor file). Its value is apart from
// entry.go's kinds.
const kindLazy fileKind = 0x80

// maxMetadataFile bounds the JSON file of one in-memory metadata value. A
// GGUF value held in memory is at most index.MaxInlineMetadata bytes of the
// file, at most 6 times that as JSON; only shared references (pickles)
// could make more.
const maxMetadataFile = 256 << 20

// buildMetadata builds .tensorfs/metadata/.
func (r *Root) buildMetadata() *entry {
	b := newBuilder(metadataDir)
	for _, k := range sortedKeys(r.idx.Metadata) {
		name := index.MetadataFileName(k)
		if checkComponent(name) != nil {
			continue // too long for a file name; still in index.json
		}
		rd, err := r.metadataReader(r.idx.Metadata[k])
		if err == nil {
			var e *entry
			if e, err = b.add(name, fileData{kind: kindLazy, size: rd.Size()}); err == nil {
				e.contents.Store(&fileContents{r: rd})
				continue
			}
		}
		r.logger.Printf("metadata key %q left out of .tensorfs/metadata: %v", k, err)
	}
	return b.finish()
}

// sizedReaderAt is what a lazy file reads from (a view.Reader).
type sizedReaderAt interface {
	io.ReaderAt
	Size() int64
}

// metadataReader returns what the file of metadata value v reads.
func (r *Root) metadataReader(v any) (sizedReaderAt, error) {
	switch x := v.(type) {
	case string:
		return strings.NewReader(x), nil
	case *index.FileValue:
		if x.Source < 0 || x.Source >= len(r.sources) {
			return nil, fmt.Errorf("source %d out of range", x.Source)
		}
		src := r.sources[x.Source]
		if x.Offset < 0 || x.Size < 0 || x.Offset > src.Size()-x.Size {
			return nil, fmt.Errorf("bytes [%d, +%d) outside %s (%d bytes)", x.Offset, x.Size, src.Name(), src.Size())
		}
		return io.NewSectionReader(src, x.Offset, x.Size), nil
	}
	size, err := index.MetadataValueSize(v, maxMetadataFile)
	if err != nil {
		return nil, err
	}
	return &renderedValue{v: v, size: size}, nil
}

// renderedValue is the JSON file of an in-memory metadata value, rendered
// on the first read.
type renderedValue struct {
	v    any
	size int64
	once sync.Once
	data []byte // GUARDED_BY once
	err  error  // GUARDED_BY once
}

func (m *renderedValue) Size() int64 { return m.size }

func (m *renderedValue) ReadAt(p []byte, off int64) (int, error) {
	m.once.Do(func() {
		m.data, m.err = index.MetadataValueJSON(m.v, maxMetadataFile)
		if m.err == nil && int64(len(m.data)) != m.size {
			m.err = fmt.Errorf("metadata value rendered to %d bytes, counted %d", len(m.data), m.size)
		}
	})
	if m.err != nil {
		return 0, m.err
	}
	if off < 0 || off >= m.size {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
