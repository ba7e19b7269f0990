package torch

import (
	"fmt"
	"testing"

	"github.com/lazyweights/tensorfs/index/numpy"
)

// ptBigStateDict is a torch.save-like archive of n tensors of 16 floats,
// each with its own storage, as a 7B-parameter model's state dict has a
// few hundred to a few thousand.
func ptBigStateDict(b testing.TB, n int) []byte {
	ts := make([]ptTS, n)
	members := []ptMember{{}}
	for i := range ts {
		key := fmt.Sprint(i)
		ts[i] = ptTS{fmt.Sprintf("model.layers.%d.mlp.weight", i), "HalfStorage", key, 32, 0, []int64{4, 8}, []int64{8, 1}, nil}
		members = append(members, ptMember{Name: "archive/data/" + key, Data: make([]byte, 64)})
	}
	members[0] = ptMember{Name: "archive/data.pkl", Data: ptTensorPickle(false, ts...)}
	return ptZip(b, members...)
}

func BenchmarkParseTorchZip10k(b *testing.B) {
	data := ptBigStateDict(b, 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ptMem("m.pt", data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTorchLegacy10k(b *testing.B) {
	ts := make([]ptTS, 10000)
	sts := make([]ptLegacyStorage, len(ts))
	for i := range ts {
		key := fmt.Sprint(94000000 + i)
		ts[i] = ptTS{fmt.Sprintf("model.layers.%d.mlp.weight", i), "HalfStorage", key, 32, 0, []int64{4, 8}, []int64{8, 1}, nil}
		sts[i] = ptLegacyStorage{key, 32, make([]byte, 64)}
	}
	data := ptLegacyFile(ptTensorPickle(true, ts...), sts...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ptMem("m.pt", data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseNPZ1k(b *testing.B) {
	arr := npyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 1, make([]byte, 64))
	var members []ptMember
	for i := 0; i < 1000; i++ {
		members = append(members, ptMember{Name: fmt.Sprintf("arr_%d.npy", i), Data: arr})
	}
	data := ptZip(b, members...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := numpy.ParseNPZ(ptMem("m.npz", data)); err != nil {
			b.Fatal(err)
		}
	}
}
