package client

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// TestWriteSafetensors writes the export of a checkpoint opened directly
// through every path (to a file: stored tensors by copy_file_range; to a
// buffer: read in chunks, several at once) and compares it with
// view.Export, the bytes a mount serves.
func TestWriteSafetensors(t *testing.T) {
	dir := tempDir(t)
	src := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, src, map[string]string{"format": "pt", "k": "v"}, []stTensor{
		{"a", "F32", []int64{1000, 3}, randomBytes(1, 12000)},
		{"b", "F16", []int64{7}, f16Bytes([]float32{1, 2, 3, 4, 5, 6, 0.5})},
		{"c", "I64", []int64{3}, randomBytes(2, 24)},
		{"d", "U8", []int64{5}, randomBytes(3, 5)},
	})
	outDirs := []string{dir}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		outDirs = append(outDirs, "/dev/shm")
	}
	for _, mode := range []backing.Mode{backing.Pread, backing.Mmap} {
		ck, err := OpenWith(src, Options{Backing: &backing.Options{Mode: mode}})
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []dtype.DType{dtype.Invalid, dtype.BF16, dtype.F64} {
			x, err := view.NewExport(ck.idx, ck.files, to)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, x.Size())
			x.ReadAt(want, 0)
			for _, chunk := range []int{0, 1000, 4093} {
				opts := SafetensorsOptions{DType: to, ChunkSize: chunk, Parallel: 3}
				var last int64
				opts.Progress = func(done, total int64) {
					if done < last || total != int64(len(want)) {
						t.Errorf("progress %d of %d after %d", done, total, last)
					}
					last = done
				}
				var buf bytes.Buffer
				if n, err := ck.WriteSafetensors(context.Background(), &buf, opts); err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
					t.Errorf("%v %v chunk %d to a buffer: %d bytes, %v; equal %v", mode, to, chunk, n, err, bytes.Equal(buf.Bytes(), want))
				}
				if last != int64(len(want)) {
					t.Errorf("progress ended at %d of %d", last, len(want))
				}
				// A file on the same filesystem, and on another one where
				// there is one (tmpfs): copy_file_range, or its fallback.
				for _, od := range outDirs {
					f, err := os.CreateTemp(od, "out")
					if err != nil {
						t.Fatal(err)
					}
					opts.Progress = nil
					n, err := ck.WriteSafetensors(context.Background(), f, opts)
					f.Close()
					got, _ := os.ReadFile(f.Name())
					os.Remove(f.Name())
					if err != nil || n != int64(len(want)) || !bytes.Equal(got, want) {
						t.Errorf("%v %v chunk %d to a file in %s: %d bytes, %v; equal %v", mode, to, chunk, od, n, err, bytes.Equal(got, want))
					}
				}
			}
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("stop")
		cancel(stop)
		if _, err := ck.WriteSafetensors(ctx, &bytes.Buffer{}, SafetensorsOptions{}); !errors.Is(err, stop) {
			t.Errorf("cancelled: %v", err)
		}
		if _, err := ck.Safetensors(dtype.I8); !errors.Is(err, ErrNotConvertible) {
			t.Errorf("Safetensors(I8): %v", err)
		}
		ck.Close()
		if _, err := ck.Safetensors(dtype.Invalid); err == nil {
			t.Error("Safetensors after Close")
		}
	}
}

// TestSafetensorsMount: a mount's export is its
// .safetensors/model.safetensors (.native/ in a mount made with --dtype,
// the view's directory for a view).
func TestSafetensorsMount(t *testing.T) {
	for _, v := range []bool{false, true} {
		m := newFakeMount(t, v)
		native := filepath.Join(m.dir, ExportPath)
		if v {
			native = filepath.Join(m.dir, ".native", ExportPath)
		}
		for p, data := range map[string]string{native: "stored", filepath.Join(m.dir, ".f16", ExportPath): "f16"} {
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(data), 0o644)
		}
		ck, err := Open(m.dir)
		if err != nil {
			t.Fatal(err)
		}
		for to, want := range map[dtype.DType]string{dtype.Invalid: "stored", dtype.F16: "f16"} {
			var buf bytes.Buffer
			if _, err := ck.WriteSafetensors(context.Background(), &buf, SafetensorsOptions{DType: to}); err != nil || buf.String() != want {
				t.Errorf("view %v, %v: %q, %v", v, to, buf.String(), err)
			}
		}
		if _, err := ck.WriteSafetensors(context.Background(), &bytes.Buffer{}, SafetensorsOptions{DType: dtype.F64}); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("no .f64 export: %v", err)
		}
		ck.Close()
	}
}
