package torch

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// ptRunPickle runs pickle bytes p (a stream at byte 0 of file "p.pkl")
// with torch's environment.
func ptRunPickle(p []byte) (any, ptStream, error) {
	st := ptStream{file: "p.pkl", size: int64(len(p))}
	v, err := st.machine(bytes.NewReader(p), newTorchEnv()).Run()
	if err != nil {
		return nil, st, st.err(err)
	}
	return v, st, nil
}

// ptWalkPickle runs p and walks what it builds; every storage is served
// from byte 0 of a file large enough.
func ptWalkPickle(p []byte) (*index.Index, error) {
	v, st, err := ptRunPickle(p)
	if err != nil {
		return nil, err
	}
	w := newPtWalker(st, func(s *torchStorage) (int, int64, int64, string) {
		n, ok := ptMul(s.numel, ptElemSize(s))
		if !ok {
			return 0, 0, 0, "storage too big"
		}
		return 0, 0, n, ""
	})
	return ptFinish(w, v, "pytorch")
}

// TestPickleTruncatedEverywhere cuts valid pickles at every byte.
func TestPickleTruncatedEverywhere(t *testing.T) {
	for _, p := range [][]byte{
		ptTensorPickle(false, ptTS{"a", "FloatStorage", "0", 4, 0, []int64{2, 2}, []int64{2, 1}, nil}),
		[]byte("\x80\x04\x95i\x00\x00\x00\x00\x00\x00\x00\x8c\x15numpy.core.multiarray\x94\x8c\x06scalar\x94\x93\x94\x8c\x05numpy\x94\x8c\x05dtype\x94\x93\x94\x8c\x02f8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01<\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t\x94bC\x08\x00\x00\x00\x00\x00\x00\xd0?\x94\x86\x94R\x94."),
	} {
		for n := 0; n < len(p); n++ {
			if _, _, err := ptRunPickle(p[:n]); err == nil {
				t.Fatalf("pickle cut at %d of %d parsed", n, len(p))
			} else if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("cut at %d: %T %v", n, err, err)
			}
		}
	}
}

// TestPickleWalkBounds: self-containing containers and exponentially
// shared references finish quickly; nesting is capped; each budget of
// the walk (results, name bytes, metadata bytes) refuses its bomb and
// names its limit, and a file below them is served.
func TestPickleWalkBounds(t *testing.T) {
	walk := ptWalkPickle
	// A list that holds itself, and a dict that holds itself.
	for _, p := range []string{"]q\x00h\x00a.", "}q\x00X\x01\x00\x00\x00ah\x00s."} {
		idx, err := walk([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if len(idx.Tensors) != 0 {
			t.Fatalf("%q: tensors %v", p, idx.Tensors)
		}
	}
	// (x, x) nested 100 deep: 2^100 paths.
	p := []byte("N")
	for i := 0; i < 100; i++ {
		p = append(p, '2', pickle.OpTUPLE2)
	}
	_, err := walk(append(p, '.'))
	ptErrContains(t, err, "p.pkl: its values, counted once per path, number more than a 202-byte pickle allows (pickle.MaxResults: 66344; shared references multiply)")
	// The budgets, one bomb each, and the same shapes just below them.
	w4 := ptRebuild(ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}, false)
	fan := func(v []byte, n int) []byte { return ptCat(v, bytes.Repeat([]byte{'2', pickle.OpTUPLE2}, n)) }
	for _, c := range []struct {
		name, want string
		pickle     []byte
	}{
		{"tensor 2^19 times", "(pickle.MaxTensors: ", ptCat(fan(w4, 19), []byte{'.'})},
		{"tensor 2^19 times under a 60 KiB key", "(pickle.MaxNameBytes: ", ptCat([]byte{'}'}, ptPkStr(strings.Repeat("k", 60<<10)), fan(w4, 19), []byte("s."))},
		{"None 2^19 times", "(pickle.MaxResults: ", ptCat(fan([]byte{'N'}, 19), []byte{'.'})},
		{"1 MiB string 10,000 times", "(pickle.MaxMetaBytes: ", ptCat([]byte("]("), ptPkStr(strings.Repeat("m", 1<<20)), bytes.Repeat([]byte{'2'}, 9999), []byte("e."))},
		{"2,000 dicts sharing a 4 MiB key", "(pickle.MaxMetaBytes: ", ptCat([]byte("](}"), ptPkStr(strings.Repeat("k", 4<<20)), []byte("q\x00K\x01s"), bytes.Repeat([]byte("}h\x00K\x01s"), 1999), []byte("e."))},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := walk(c.pickle)
		runtime.ReadMemStats(&after)
		ptErrContains(t, err, "p.pkl: ", c.want, "shared references multiply")
		// Cost follows the file: the budgets' floors (a few tens of MB at
		// most) plus a small multiple of the pickle, whatever the fan-out.
		bound := uint64(48<<20 + 8*len(c.pickle))
		if ptRaceEnabled {
			bound *= 4
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
			t.Errorf("%s: allocated %d bytes for a %d-byte pickle (bound %d)", c.name, alloc, len(c.pickle), bound)
		}
	}
	for _, ok := range [][]byte{
		ptCat(fan([]byte{'N'}, 15), []byte{'.'}),
		ptCat(fan(w4, 12), []byte{'.'}),
		ptCat([]byte("]("), ptPkStr(strings.Repeat("m", 1<<20)), bytes.Repeat([]byte{'2'}, 3), []byte("e.")),
	} {
		if _, err := walk(ok); err != nil {
			t.Errorf("below the budgets: %v", err)
		}
	}
	// Nesting deeper than MaxNesting.
	p = []byte("N")
	for i := 0; i < index.MaxNesting+2; i++ {
		p = append(p, pickle.OpTUPLE1)
	}
	_, err = walk(append(p, '.'))
	ptErrContains(t, err, "nest deeper than")
	// Metadata of plain values, NaN made JSON-safe.
	idx, err := walk([]byte("}(X\x01\x00\x00\x00aFnan\nX\x01\x00\x00\x00b](K\x01K\x02eX\x01\x00\x00\x00cG\x7f\xf0\x00\x00\x00\x00\x00\x00u."))
	if err != nil {
		t.Fatal(err)
	}
	if idx.Metadata["a"] != "NaN" || idx.Metadata["c"] != "Infinity" || len(idx.Metadata["b"].([]any)) != 2 {
		t.Fatalf("metadata %v", idx.Metadata)
	}
}

// FuzzUnpickle runs arbitrary bytes through the unpickler with the torch
// environment and walks whatever it builds.
func FuzzUnpickle(f *testing.F) {
	f.Add([]byte("\x80\x02}(X\x01\x00\x00\x00aK\x01u."))
	f.Add(ptTensorPickle(false, ptTS{"a", "FloatStorage", "0", 4, 0, []int64{2, 2}, []int64{1, 2}, nil}))
	f.Add(ptTensorPickle(true, ptTS{"a", "HalfStorage", "k", 8, 1, []int64{3}, []int64{2}, ptPkTuple(ptPkStr("v"), ptPkInt(2), ptPkInt(4))}))
	f.Add([]byte("(lp0\nI1\naS'x'\np1\na(dp2\nV\\u00e9\np3\nF1.5\nsa."))
	f.Add([]byte("\x80\x04\x95i\x00\x00\x00\x00\x00\x00\x00\x8c\x15numpy.core.multiarray\x94\x8c\x06scalar\x94\x93\x94\x8c\x05numpy\x94\x8c\x05dtype\x94\x93\x94\x8c\x02f8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01<\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t\x94bC\x08\x00\x00\x00\x00\x00\x00\xd0?\x94\x86\x94R\x94."))
	// Shared-reference fan-out: one tensor, and None, reached by 2^20 paths.
	w4 := ptRebuild(ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}, false)
	f.Add(ptCat(w4, bytes.Repeat([]byte{'2', pickle.OpTUPLE2}, 20), []byte{'.'}))
	f.Add(ptCat([]byte("]q\x00("), bytes.Repeat([]byte("h\x00"), 8), []byte("e"), bytes.Repeat([]byte{'2', pickle.OpTUPLE2}, 20), []byte{'.'}))
	for _, b := range ptSeedFiles("pytorch/gopickle/*proto[0-9].pt", "generated/torch_mixed_legacy.pt") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st := ptStream{file: "f.pkl", size: int64(len(b))}
		v, err := st.machine(bytes.NewReader(b), newTorchEnv()).Run()
		if err != nil {
			err = st.err(err)
			if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		size := int64(len(b))
		w := newPtWalker(st, func(st *torchStorage) (int, int64, int64, string) {
			n, ok := ptMul(st.numel, ptElemSize(st))
			if !ok || n > size {
				return 0, 0, 0, "storage too big"
			}
			return 0, 0, n, ""
		})
		idx, err := ptFinish(w, v, "pytorch")
		if err == nil {
			ptCheckIndex(t, idx, "f.pkl", size)
		}
	})
}

// TestPickleLargeValues: a compressed data.pkl past pickle.MaxPickle is
// refused.
func TestPickleLargeValues(t *testing.T) {
	if ptRaceEnabled {
		t.Skip("inflates 64 MiB: 15 s under -race; the normal pass runs it")
	}
	big := append(append(append([]byte{pickle.OpPROTO, 2}, binary.LittleEndian.AppendUint64([]byte{pickle.OpBINBYTES8}, pickle.MaxPickle)...), make([]byte, pickle.MaxPickle)...), '.')
	_, err := Parse(ptMem("m.pt", ptZip(t, ptMember{Name: "a/data.pkl", Data: big, Deflate: true})))
	ptErrContains(t, err, "m.pt: compressed pickle larger than 67108864 bytes")
}
