//go:build !cgo

package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenWithoutCgo(t *testing.T) {
	_, err := Open()
	if !errors.Is(err, ErrNoRuntime) || !strings.HasPrefix(err.Error(), "CUDA runtime not found (libcudart.so): ") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("Open: %v", err)
	}
}
