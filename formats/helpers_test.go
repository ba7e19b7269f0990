package formats

import (
	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/internal/testenv/parsetest"
)

// The safetensors helpers shared with the format packages' tests
// (internal/testenv/parsetest), under the names these tests use.

var (
	stFile       = parsetest.STFile
	stBuild      = parsetest.STBuild
	stRaw        = parsetest.STRaw
	stCheckError = parsetest.CheckError
	stRealFiles  = parsetest.SafetensorsFiles
)

// stT describes one tensor for stBuild.
type stT = parsetest.STensor

// testOptions share the process's inflate cache, as the callers of Load do.
var testOptions = Options{Inflate: backing.DefaultInflateCache()}
