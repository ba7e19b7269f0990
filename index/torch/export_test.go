package torch

import "testing"

// Exported for torch_formats_test.go (package torch_test).
var (
	PtMem        = ptMem
	PtGoodZip    = ptGoodZip
	PtF32        = ptF32
	NpyBuild     = npyBuild
	PtRunRef     = ptRunRef
	PtCompareRef = ptCompareRef
	PtNames      = ptNames
	PtSHA        = ptSHA
	PtGather     = ptGather
)

// PtZip1 is a zip of one stored member.
func PtZip1(t testing.TB, name string, data []byte) []byte {
	return ptZip(t, ptMember{Name: name, Data: data})
}
