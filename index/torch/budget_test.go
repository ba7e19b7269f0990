package torch

import (
	"bytes"
	"testing"

	"github.com/lazyweights/tensorfs/index/pickle"
)

// ptSharedList pickles [w]*n: one tensor named n times by memo GETs,
// what torch.save([t]*n) writes (2 bytes a tensor).
func ptSharedList(n int) []byte {
	w := ptRebuild(ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}, false)
	return ptCat([]byte{pickle.OpPROTO, 2, ']', '('}, w, []byte("q\x01"), bytes.Repeat([]byte("h\x01"), n-1), []byte("e."))
}

// Budgets follow the file's bytes (issue 28): torch.save([t]*1000000)
// (2 MB) built a million tensors in 757 MiB; a deflated data.pkl got the
// budgets of its inflated size, so 65 KB of file cost 1,457 MiB; a
// flood of MEMOIZE opcodes grew the memo without bound.
func TestBudgetsFollowTheFile(t *testing.T) {
	store := ptMember{Name: "a/data/0", Data: ptF32(4)}
	flood := ptCat([]byte("\x80\x04}"), bytes.Repeat([]byte{pickle.OpMEMOIZE}, 1<<20), []byte("."))
	for _, c := range []struct {
		name  string
		parse func() error
		want  string
	}{
		{"shared list", func() error { _, err := ptWalkPickle(ptSharedList(200000)); return err }, "(pickle.MaxTensors: 41392;"},
		{"shared list, deflated data.pkl", func() error {
			_, err := Parse(ptMem("m.pt", ptZip(t, ptMember{Name: "a/data.pkl", Data: ptSharedList(20000), Deflate: true}, store)))
			return err
		}, "(pickle.MaxTensors: 16"},
		{"memo flood", func() error { _, err := ptWalkPickle(flood); return err }, "(limit pickle.MaxMemo: 589826 for 1048580 bytes)"},
		{"memo flood, deflated data.pkl", func() error {
			_, err := Parse(ptMem("m.pt", ptZip(t, ptMember{Name: "a/data.pkl", Data: flood, Deflate: true}, store)))
			return err
		}, "(limit pickle.MaxMemo: 66058 for 1044 bytes) (member a/data.pkl, at byte"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ptErrContains(t, c.parse(), "than", c.want)
		})
	}
	// The same shapes within the budgets are served.
	if idx, err := ptWalkPickle(ptSharedList(10000)); err != nil || len(idx.Tensors) != 10000 {
		t.Fatalf("%v", err)
	}
	if idx, err := Parse(ptMem("m.pt", ptZip(t, ptMember{Name: "a/data.pkl", Data: ptSharedList(10000), Deflate: true}, store))); err != nil || len(idx.Tensors) != 10000 {
		t.Fatalf("%v", err)
	}
}
