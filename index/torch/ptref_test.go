package torch

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The reference scripts of this test binary run together, in one Python
// process, the first time a test asks for one (ptReference): starting
// Python and torch once per script took most of the package's test time.
// Each script still runs as if alone: argv[1] its own fresh directory, a
// fresh __main__ module (torch.save pickles the classes a script defines
// by their name in __main__), its stdout its reference, and the modules
// it made by hand (a numpy 2 stand-in) gone after it.

// ptReferenceScripts are the scripts run together, with the arguments
// after the output directory.
func ptReferenceScripts() []ptScript {
	return []ptScript{
		{"torch", ptTorchScript, ptSharedTorchFiles()},
		{"tensor_keys", ptTensorKeysScript, nil},
		{"old", ptOldScript, nil},
		{"numpy", ptNumpyScript, nil},
		{"numpy_protocol2", testenv.TorchNumpyProtocol2Script, nil},
	}
}

type ptScript struct {
	name, script string
	args         []string
}

// ptRefDriver runs the jobs of the JSON file argv[1] ([[name, script,
// argv...], ...]) one after another and writes to argv[2] {name: {"out":
// stdout} or {"err": traceback}}.
const ptRefDriver = `
import sys, io, json, types, traceback, contextlib
jobs = json.load(open(sys.argv[1]))
result_path = sys.argv[2]
main = sys.modules["__main__"]
res = {}
for name, script, *argv in jobs:
    before = dict(sys.modules)
    mod = types.ModuleType("__main__")
    sys.modules["__main__"] = mod
    sys.argv = ["-c"] + argv
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(script, name, "exec"), mod.__dict__)
        res[name] = {"out": buf.getvalue()}
    except BaseException:
        res[name] = {"err": traceback.format_exc()}
    finally:
        sys.modules["__main__"] = main
        for k in list(sys.modules):
            if k in before:
                sys.modules[k] = before[k]
            elif getattr(sys.modules[k], "__spec__", None) is None:
                del sys.modules[k]
json.dump(res, open(result_path, "w"))
`

var ptRefs struct {
	once sync.Once
	dir  string                               // removed by TestMain
	out  map[string]struct{ Out, Err string } // by script name
	err  error                                // the whole run failed
}

// ptReference returns the stdout of script, one of ptReferenceScripts,
// run by py with a fresh directory as argv[1].
func ptReference(t *testing.T, py, script string) []byte {
	t.Helper()
	ptRefs.once.Do(func() { ptRefs.err = ptRunReferences(py) })
	if ptRefs.err != nil {
		t.Fatalf("python: %v", ptRefs.err)
	}
	for _, s := range ptReferenceScripts() {
		if s.script != script {
			continue
		}
		r := ptRefs.out[s.name]
		if r.Err != "" {
			t.Fatalf("python: %s", r.Err)
		}
		return []byte(r.Out)
	}
	t.Fatalf("not a reference script of ptReferenceScripts: %.60q", script)
	return nil
}

// ptRunReferences runs every reference script in one Python process.
func ptRunReferences(py string) error {
	dir, err := os.MkdirTemp("", "tensorfs-torch-ref-")
	if err != nil {
		return err
	}
	ptRefs.dir = dir
	var jobs [][]string
	for _, s := range ptReferenceScripts() {
		out := filepath.Join(dir, s.name)
		if err := os.Mkdir(out, 0o755); err != nil {
			return err
		}
		jobs = append(jobs, append([]string{s.name, s.script, out}, s.args...))
	}
	b, err := json.Marshal(jobs)
	if err != nil {
		return err
	}
	jobsPath, resPath := filepath.Join(dir, "jobs.json"), filepath.Join(dir, "result.json")
	if err := os.WriteFile(jobsPath, b, 0o644); err != nil {
		return err
	}
	cmd := exec.Command(py, "-c", ptRefDriver, jobsPath, resPath)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	if _, err := cmd.Output(); err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return fmt.Errorf("%v\n%s", err, msg)
	}
	b, err = os.ReadFile(resPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &ptRefs.out); err != nil {
		return fmt.Errorf("python output: %v", err)
	}
	return nil
}

// ptSharedTorchFiles are the PyTorch files of the shared test data
// (none where it is absent: the tests that need them skip).
func ptSharedTorchFiles() []string {
	dir, ok := testenv.Optional()
	if !ok {
		return nil
	}
	var files []string
	for _, g := range []string{"pytorch/*/*.pt", "generated/torch_*.pt"} {
		m, _ := filepath.Glob(filepath.Join(dir, g))
		files = append(files, m...)
	}
	return files
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ptRefs.dir != "" {
		os.RemoveAll(ptRefs.dir)
	}
	os.Exit(code)
}
