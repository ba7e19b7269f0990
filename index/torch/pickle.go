package torch

// The PyTorch reader's side of the restricted unpickler
// (index/pickle): where a pickle stream lies in its file, and how the
// unpickler's errors become FormatErrors.

import (
	"errors"
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// ptStream is one pickle stream of a file: a plain byte range starting
// at base, or (base < 0) bytes named by where ("member a/data.pkl", a
// decompressed member).
type ptStream struct {
	file  string
	base  int64
	where string
	size  int64
	// cost is what the stream costs in the file when less than size
	// (a deflated data.pkl: its compressed bytes); 0: size. Budgets
	// follow it.
	cost int64
}

// budgetSize is the size the stream's budgets follow.
func (s ptStream) budgetSize() int64 {
	if s.cost > 0 && s.cost < s.size {
		return s.cost
	}
	return s.size
}

func (s ptStream) machine(r io.Reader, env pickle.Env) *pickle.Machine {
	m := pickle.NewMachine(r, s.size, env)
	if n := s.budgetSize(); n < s.size {
		m.SetCost(n)
	}
	return m
}

// errAt is a FormatError at stream offset off.
func (s ptStream) errAt(off int64, msg string) error {
	if s.base >= 0 {
		return &index.FormatError{File: s.file, Offset: s.base + off, Msg: msg}
	}
	return index.ErrorAt(s.file, fmt.Sprintf("%s, at byte %d", s.where, off), "%s", msg)
}

// err turns an error of the machine into a FormatError: a read error that
// already is one is returned as it is.
func (s ptStream) err(err error) error {
	var fe *index.FormatError
	if errors.As(err, &fe) {
		return fe
	}
	var pe *pickle.Error
	if errors.As(err, &pe) {
		return s.errAt(pe.Off, pe.Msg)
	}
	return err
}

// fileOff is the file offset of stream offset off, or -1 when the stream
// is not a plain range of the file.
func (s ptStream) fileOff(off int64) int64 {
	if s.base < 0 || off < 0 {
		return -1
	}
	return s.base + off
}
