package client

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestQuantTwins: a block-FP8 weight keeps its stored name, so the name
// has two tensors: Tensor, OpenTensor(AsStored) and TensorsIn(AsStored)
// give the stored F8 codes, and a view dtype the logical weight's values
// (shared fixture quant/fp8_block: EXPECTED.json's sha256).
func TestQuantTwins(t *testing.T) {
	c, err := Open(testenv.Path(t, "quant/fp8_block"))
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	defer c.Close()
	const name = "model.layers.0.mlp.down_proj.weight"
	hash := func(to dtype.DType) string {
		r, err := c.OpenTensor(name, to)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	if got, want := hash(AsStored), "51075cb7b556b0c3ff2c3b63a7bc16df2a0f11954f6df7ba577a364d2794acca"; got != want {
		t.Errorf("as stored: %s, want the F8 codes' %s", got, want)
	}
	if got, want := hash(dtype.F32), "3b4693d24db8afd34d73f31131d878492749799abcc5edae7ef26cc29b429ce8"; got != want {
		t.Errorf("F32: %s, want the values' %s", got, want)
	}
	if ti, ok := c.Tensor(name); !ok || ti.DType != dtype.F8E4M3 || ti.Role != index.RolePart {
		t.Errorf("Tensor: %+v", ti)
	}
	if ti, ok := c.TensorIn(name, dtype.BF16); !ok || ti.DType != dtype.F32 || ti.Role != index.RoleLogical {
		t.Errorf("TensorIn BF16: %+v", ti)
	}
	count := func(to dtype.DType) (n int) {
		for _, ti := range c.TensorsIn(to) {
			if ti.Name == name {
				n++
			}
		}
		return n
	}
	if count(AsStored) != 1 || count(dtype.BF16) != 1 {
		t.Errorf("%s listed %d times as stored, %d in BF16", name, count(AsStored), count(dtype.BF16))
	}
}
