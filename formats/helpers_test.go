package formats

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testdata"
)

// Test helpers copied from index/safetensors (a test package cannot
// import another's test files).

// stMemFile is an in-memory File.
type stMemFile struct {
	*bytes.Reader
	name string
}

func (m *stMemFile) Name() string { return m.name }

func stFile(name string, b []byte) *stMemFile { return &stMemFile{bytes.NewReader(b), name} }

// stRaw assembles a safetensors file from a header text and data bytes.
func stRaw(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// stT describes one tensor for stBuild.
type stT struct {
	name  string
	dtype string
	shape []int
	bytes int // data bytes
}

// stBuild writes a valid safetensors file the way the reference writer
// does (tensors in the given order, header padded with spaces to a multiple
// of 8 unless pad is false). Data bytes count up from 1.
func stBuild(meta map[string]string, pad bool, ts ...stT) []byte {
	var h bytes.Buffer
	h.WriteByte('{')
	first := true
	if meta != nil {
		mb, _ := json.Marshal(meta)
		h.WriteString(`"__metadata__":`)
		h.Write(mb)
		first = false
	}
	off := 0
	for _, t := range ts {
		if !first {
			h.WriteByte(',')
		}
		first = false
		nb, _ := json.Marshal(t.name)
		sb, _ := json.Marshal(t.shape)
		if t.shape == nil {
			sb = []byte("[]")
		}
		fmt.Fprintf(&h, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, nb, t.dtype, sb, off, off+t.bytes)
		off += t.bytes
	}
	h.WriteByte('}')
	for pad && h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	data := make([]byte, off)
	for i := range data {
		data[i] = byte(i + 1)
	}
	return stRaw(h.String(), data)
}

// stCheckError checks that err is a one-line *FormatError containing want.
func stCheckError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	var fe *index.FormatError
	if !errors.As(err, &fe) || !errors.Is(err, index.ErrFormat) {
		t.Errorf("error %v is %T, not a *FormatError", err, err)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error is not one line: %q", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// stRealFiles lists the shared testdata safetensors files.
func stRealFiles(t *testing.T) []string {
	dir := testdata.Path(t, "safetensors")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".safetensors") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		testdata.SkipOrFail(t, fmt.Sprintf("only %d safetensors files under %s", len(files), dir))
	}
	return files
}

// testOptions share the process's inflate cache, as the callers of Load do.
var testOptions = Options{Inflate: backing.DefaultInflateCache()}
