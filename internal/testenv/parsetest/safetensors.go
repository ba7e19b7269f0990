package parsetest

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

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// STFile is a safetensors test file in memory (a *MemFile).
func STFile(name string, b []byte) *MemFile { return &MemFile{bytes.NewReader(b), name} }

// STRaw assembles a safetensors file from a header text and data bytes.
func STRaw(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// STensor describes one tensor for STBuild.
type STensor struct {
	Name  string
	DType string
	Shape []int
	Bytes int // data bytes
}

// STBuild writes a valid safetensors file the way the reference writer
// does (tensors in the given order, header padded with spaces to a multiple
// of 8 unless pad is false). Data bytes count up from 1.
func STBuild(meta map[string]string, pad bool, ts ...STensor) []byte {
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
		nb, _ := json.Marshal(t.Name)
		sb, _ := json.Marshal(t.Shape)
		if t.Shape == nil {
			sb = []byte("[]")
		}
		fmt.Fprintf(&h, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, nb, t.DType, sb, off, off+t.Bytes)
		off += t.Bytes
	}
	h.WriteByte('}')
	for pad && h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	data := make([]byte, off)
	for i := range data {
		data[i] = byte(i + 1)
	}
	return STRaw(h.String(), data)
}

// CheckError checks that err is a one-line *FormatError containing want.
func CheckError(t *testing.T, err error, want string) {
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

// SafetensorsFiles lists the shared testdata safetensors files.
func SafetensorsFiles(t *testing.T) []string {
	dir := testenv.Path(t, "safetensors")
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
		testenv.SkipOrFail(t, fmt.Sprintf("only %d safetensors files under %s", len(files), dir))
	}
	return files
}
