package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// TestMountRoles: a mount's tensors take their roles from index.json's
// "role" (a part is listed as stored only), not from its "quantization",
// which adds the logical weights; an unknown role, or a quantized mount
// whose tensors say no role (served by an older tensorfs), is one line
// naming index.json.
func TestMountRoles(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".tensorfs"), 0o755)
	doc := `{"format":"safetensors","sources":[],"metadata":{},"tensors":[` +
		`{"name":"b","path":"b","dtype":"F32","shape":[1],"size":4},` +
		`{"name":"s","path":"s","dtype":"F32","shape":[1],"size":4,"role":"part"},` +
		`{"name":"w.q","path":"w.q","dtype":"I8","shape":[4],"size":4,"role":"part"}],` +
		`"quantization":{"scheme":"x","weights":[{"name":"w","path":"w","shape":[4],"parts":["w.q"]}]}}`
	os.WriteFile(filepath.Join(dir, MountIndexPath), []byte(doc), 0o644)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, want := range map[string]index.Role{"b": index.RoleStored, "s": index.RolePart, "w.q": index.RolePart} {
		if ti, ok := c.Tensor(name); !ok || ti.Role != want {
			t.Errorf("%s: %+v, want role %v", name, ti, want)
		}
	}
	if ti, ok := c.TensorIn("w", dtype.F32); !ok || ti.Role != index.RoleLogical {
		t.Errorf("w in F32: %+v", ti)
	}
	var names []string
	for _, ti := range c.TensorsIn(dtype.F32) {
		names = append(names, ti.Name)
	}
	if strings.Join(names, " ") != "b w" {
		t.Errorf("in F32: %v, want b and the logical w (no parts)", names)
	}

	// A mount from before roles: its parts say none.
	os.WriteFile(filepath.Join(dir, MountIndexPath), []byte(strings.ReplaceAll(doc, `,"role":"part"`, ``)), 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, MountIndexPath)+`: no tensor is a part of its weights: a mount served by a tensorfs older than this client`) {
		t.Errorf("a mount without roles: %v", err)
	}

	os.WriteFile(filepath.Join(dir, MountIndexPath), []byte(strings.Replace(doc, `"role":"part"`, `"role":"codes"`, 1)), 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, MountIndexPath)+`: unknown role "codes" (tensor "s")`) {
		t.Errorf("unknown role: %v", err)
	}
}
