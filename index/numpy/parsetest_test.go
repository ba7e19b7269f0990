package numpy

import (
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv/parsetest"
)

// The helpers shared with the other format packages' tests
// (internal/testenv/parsetest), under the names these tests use.

type (
	ptMemFile = parsetest.MemFile
	ptMember  = parsetest.Member
)

var (
	ptMem         = parsetest.Mem
	ptGather      = parsetest.Gather
	ptSHA         = parsetest.SHA
	ptErrContains = parsetest.ErrContains
	ptTestdataDir = parsetest.TestdataDir
	ptSeedFiles   = parsetest.SeedFiles
	ptZip         = parsetest.Zip
	ptF32         = parsetest.F32
	ptNames       = parsetest.Names
	npyBuild      = parsetest.NPYBuild
	npzGather     = parsetest.MemberGather
)

// ptCheckIndex checks what every parser promises about an Index.
func ptCheckIndex(t testing.TB, idx *index.Index, name string, size int64) {
	t.Helper()
	parsetest.CheckIndex(t, idx, name, size, DeflateMaxRatio)
}

// ptParse parses b as a file named name: an .npy file by its magic, else
// an .npz archive (what format detection picks for each).
func ptParse(name string, b []byte) (*index.Index, error) {
	if SniffNPY(b) {
		return ParseNPY(ptMem(name, b))
	}
	return ParseNPZ(ptMem(name, b))
}
