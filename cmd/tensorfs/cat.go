package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	tfsource "github.com/lazyweights/tensorfs/source"
	"github.com/lazyweights/tensorfs/view"
)

const catAbout = `
Writes the bytes of the tensor NAME of SOURCE to stdout, without mounting:
exactly what the mounted file holds (row-major, little-endian, in the
stored dtype), or converted with --dtype (what .f32/ etc. hold), or as a
NumPy .npy file with --npy (what .npy/ holds). With --split D/N/K, only
part K (0-based) of N of the tensor along dimension D, with the bounds of
numpy.array_split (what .split/D/N/K/ holds, in every view and with
--npy). NAME is the tensor's name
as "tensorfs ls" shows it, its path in the mounted tree, or the
checkpoint's own key of it (a distributed checkpoint's dotted
"model.layers.0.w" for the name "model/layers.0.w": index.json "keys");
when NAME is one tensor's name and another's path or key, the name wins.`

// catChunk is how much cat reads and writes at a time.
const catChunk = 1 << 20

func runCat(args []string) error {
	f := newFlags("cat", "[--dtype DT | --npy] [--split D/N/K] SOURCE NAME", catAbout)
	addRemoteFlags(f)
	dtFlag := f.String("dtype", "", "convert to `DT` (f32, f16, bf16 or f64) as the .f32/ .f16/ .bf16/ .f64/ views do")
	npy := f.Bool("npy", false, "write a NumPy .npy file (the tensor's dtype where NumPy has it, float32 otherwise)")
	splitFlag := f.String("split", "", "write only part `D/N/K`: part K of N along dimension D, as numpy.array_split cuts it")
	if err := f.parse(args, 2, 2); err != nil {
		return err
	}
	var part *view.Split
	if *splitFlag != "" {
		s, err := parseSplit(*splitFlag)
		if err != nil {
			return usagef("cat: --split: %v", err)
		}
		part = &s
	}
	var to dtype.DType
	if *dtFlag != "" {
		dt, err := dtype.ParseView(*dtFlag)
		if err != nil {
			return usagef("cat: --dtype: %v", err)
		}
		to = dt
	}
	if *npy && to != dtype.Invalid {
		return usagef("cat: --dtype and --npy cannot be combined")
	}
	source, name := f.Arg(0), f.Arg(1)
	ckpt, err := openSource(source, sourceOptions{Mode: backing.Mmap})
	if err != nil {
		return err
	}
	defer ckpt.close()
	t, ok := ckpt.find(name, to != dtype.Invalid)
	if !ok {
		return fmt.Errorf("%s: no tensor named %q (see `tensorfs ls %s`)", source, name, source)
	}
	src := ckpt.sources[t.Source]
	// A stored .npz member's CRC-32 (an ONNX tensor's external data
	// SHA-1), before any of its bytes go out.
	if err := t.Verify(src); err != nil {
		return fmt.Errorf("%s: tensor %q: %v", source, t.Name, err)
	}
	what := fmt.Sprintf("%s: tensor %q", source, t.Name)
	form := view.Form{NPY: *npy, Split: part}
	if !*npy && to != dtype.Invalid && to != t.DType {
		if !view.Convertible(t, to) {
			return fmt.Errorf("%s is %s, which cannot be converted to %s", what, t.DType, to)
		}
		form.To = to
	}
	if part != nil && !part.Valid(t.Shape) {
		return fmt.Errorf("%s: no part %s: shape %v has %d dimensions", what, *part, t.Shape, len(t.Shape))
	}
	if form == (view.Form{}) && t.Contiguous() {
		return copyOut(os.Stdout, io.NewSectionReader(src, t.Offset, t.Size), t.Size, what, source)
	}
	v, err := view.Open(t, src, form)
	if err != nil {
		if part != nil {
			return fmt.Errorf("%s: %v", what, strings.TrimPrefix(err.Error(), "view: "+t.Name+": "))
		}
		return fmt.Errorf("%s: %v", what, err)
	}
	return copyOut(os.Stdout, v, v.Size(), what, source)
}

// copyOut writes the size bytes of r to w in catChunk pieces; a read
// error is said after what, naming the remote SOURCE src once (the
// store's error names the object, which src is).
func copyOut(w io.Writer, r io.ReaderAt, size int64, what, src string) error {
	buf := make([]byte, min(int64(catChunk), max(size, 1)))
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		got, err := r.ReadAt(buf[:n], off)
		if got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			msg := err.Error()
			if tfsource.IsRemote(src) {
				msg = strings.TrimPrefix(msg, src+": ")
			}
			return fmt.Errorf("%s: reading at byte %d: %s", what, off+int64(got), msg)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return fmt.Errorf("writing to stdout: %v", err)
		}
		off += int64(n)
	}
	return nil
}

// parseSplit parses D/N/K.
func parseSplit(s string) (view.Split, error) {
	f := strings.Split(s, "/")
	if len(f) != 3 {
		return view.Split{}, fmt.Errorf("%q is not D/N/K (dimension/parts/part, e.g. 0/8/3)", s)
	}
	var v [3]int
	for i, x := range f {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			return view.Split{}, fmt.Errorf("%q is not D/N/K (dimension/parts/part, e.g. 0/8/3): %q is not a number", s, x)
		}
		v[i] = n
	}
	if v[1] < 1 || v[2] >= v[1] {
		return view.Split{}, fmt.Errorf("%q: want parts N ≥ 1 and part K < N", s)
	}
	return view.Split{Dim: v[0], Parts: v[1], Part: v[2]}, nil
}
