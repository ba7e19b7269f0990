package fs

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	"github.com/lazyweights/tensorfs/index"
)

// indexFile is .tensorfs/index.json: the index.Document of the top-level
// tensors (format, sources, metadata, tensors in name order), with "view"
// added after "format" when the top level is a converted view
// (Options.View), then "native" after "tensors": the stored tree under
// .native/, described the same way (every tensor, integers included, at
// paths starting ".native/"), "unserved" where the checkpoint
// holds something that is not served (index.Index.Unserved), "keys"
// where the format keys its entries by something else than their names
// (index.Index.Keys), "not_read" after them (index.Index.NotRead), and
// last "quantization" where it is
// quantized (index.Index.Quantization: the logical weights of the
// converted views and their parts). Each
// tensor's dtype and size are those of
// its file, source and offset are present where the file is one
// contiguous range of its source, and its role where it is a part or a
// logical weight. Its text is index.Document.WriteIndexJSON's (what
// `tensorfs ls --json` prints), made from the same pieces (Frame,
// WriteDocLine): indented with one tensor per line so that `head` shows
// the top.
//
// It is served as a virtualFile, its bytes made on demand rather than kept for the life of the
// mount (about 150 bytes a tensor: 150 MB for a million tensors). NewRoot
// renders the document once to learn its size and where every
// indexMarkEvery-th unit starts; a read renders from the mark before it
// to its end. A unit is the head (up to the first tensor line), one
// tensor line, the text between the two lists, or the tail. What is kept
// is the head, a tensor index per tensor, and a mark per
// indexMarkEvery lines.
type indexFile struct {
	r          *Root
	head, mid  []byte
	tail       []byte
	lists      [2][]uint32 // "tensors", and "native" with a view: tensor indices
	marks      []int64     // marks[k]: offset of unit k*indexMarkEvery
	size       int64
	units      int
	renderPool sync.Pool // *bytes.Buffer
}

// indexMarkEvery is how many units apart the marks are: a read renders
// at most this many units before its offset.
const indexMarkEvery = 64

// newIndexFile renders the document once for its size and marks.
func (r *Root) newIndexFile(listed, native []uint32) (*indexFile, error) {
	f := &indexFile{r: r, lists: [2][]uint32{listed, native}}
	var err error
	// The text around the lines: the head, what closes "tensors" (and
	// opens "native"), the fields after the lists.
	if f.head, f.mid, f.tail, err = r.indexDoc().Frame(len(listed), len(native)); err != nil {
		return nil, err
	}
	f.units = len(listed) + len(native) + 3
	f.marks = make([]int64, 0, f.units/indexMarkEvery+1)
	var buf bytes.Buffer
	for u := 0; u < f.units; u++ {
		if u%indexMarkEvery == 0 {
			f.marks = append(f.marks, f.size)
		}
		buf.Reset()
		if err := f.unit(&buf, u); err != nil {
			return nil, err
		}
		f.size += int64(buf.Len())
	}
	return f, nil
}

// unit writes unit u of the document.
func (f *indexFile) unit(buf *bytes.Buffer, u int) error {
	n0 := len(f.lists[0])
	switch {
	case u == 0:
		buf.Write(f.head)
	case u <= n0:
		return f.line(buf, placeTop, f.lists[0], u-1)
	case u == n0+1:
		buf.Write(f.mid)
	case u < f.units-1:
		return f.line(buf, placeNative, f.lists[1], u-n0-2)
	default:
		buf.Write(f.tail)
	}
	return nil
}

// line writes tensor line i of list, with its separator.
func (f *indexFile) line(buf *bytes.Buffer, p place, list []uint32, i int) error {
	d := f.r.docOf(p, list[i])
	return index.WriteDocLine(buf, i, &d)
}

func (f *indexFile) Size() int64 { return f.size }

// ReadAt renders from the last mark at or before off until p is full.
func (f *indexFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= f.size {
		return 0, fmt.Errorf("index.json: read at %d of %d bytes", off, f.size)
	}
	k := sort.Search(len(f.marks), func(i int) bool { return f.marks[i] > off }) - 1
	start := f.marks[k]
	buf, _ := f.renderPool.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer f.renderPool.Put(buf)
	buf.Reset()
	end := min(off+int64(len(p)), f.size)
	for u := k * indexMarkEvery; start+int64(buf.Len()) < end && u < f.units; u++ {
		if err := f.unit(buf, u); err != nil {
			return 0, err
		}
	}
	if start+int64(buf.Len()) < end {
		return 0, fmt.Errorf("index.json: rendered %d bytes of %d", start+int64(buf.Len()), f.size)
	}
	return copy(p, buf.Bytes()[off-start:end-start]), nil
}
