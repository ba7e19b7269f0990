package check

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Problem is one thing wrong with a checkpoint: the file it is in, where
// in it (a tensor, a shard; "" when the file as a whole), and what, in
// one line without the file name.
type Problem struct {
	File  string `json:"file"`
	Where string `json:"where,omitempty"`
	What  string `json:"problem"`
}

// String is the problem as one line: "FILE: WHAT (WHERE)", the form of
// every other tensorfs error (index.FormatError).
func (p Problem) String() string {
	return (&index.FormatError{File: p.File, Offset: -1, Where: p.Where, Msg: p.What}).Error()
}

// FromError is err as a Problem: an *index.FormatError keeps its file
// and place (a byte offset goes into Where), any other error is all
// What.
func FromError(err error) Problem {
	var fe *index.FormatError
	if !errors.As(err, &fe) {
		return Problem{What: index.Printable(err.Error())}
	}
	where := fe.Where
	if fe.Offset >= 0 {
		if where != "" {
			where += ", "
		}
		where += "at byte " + strconv.FormatInt(fe.Offset, 10)
	}
	return Problem{File: fe.File, Where: where, What: fe.Msg}
}

// Checkpoint is what the checkers look at: a checkpoint loaded with its
// problems reported rather than fatal (source.Options.Report).
type Checkpoint struct {
	Source  string           // SOURCE as the user gave it
	Index   *index.Index     // what was loaded
	Sources []backing.Source // Sources[i] reads Index.Sources[i]
	// Loading are the problems the loader went on past (a weight map
	// and its shards disagreeing), in the order found.
	Loading []Problem
	// SHA256, when set, returns the sha256 (hex) that the SOURCE states
	// for the whole bytes of Sources[i] where the source itself does not
	// (Digested): an ollama:// blob's digest (source.Checkpoint.SHA256).
	SHA256 func(i int) (hex string, ok bool)
	// Beside are files beside the checkpoint whose sha256 the SOURCE
	// states (an ollama:// model's metadata blobs: template, license,
	// config.json...): Data hashes each whole against it.
	Beside []DigestedFile
}

// DigestedFile is a file and the sha256 (hex) its SOURCE states for it.
type DigestedFile struct {
	Src    backing.Source
	SHA256 string
}

// Checker is one check of a whole checkpoint that reads no tensor's
// bytes (only what loading read, and sizes): Run returns its problems,
// nil when it finds none.
type Checker struct {
	Name string // a few words for docs and tests: "weight map and shards"
	Run  func(*Checkpoint) []Problem
}

// Checkers are the checks Run makes, in order: the extension point of
// `tensorfs check`. A new check (every quantized weight has its parts)
// is one more entry here, with a test that a checkpoint missing what it
// checks fails it.
var Checkers = []Checker{
	{"weight map and shards", loading},
	{"entries not served", unserved},
	{"tensor ranges", ranges},
	{"quantized weights", quantized},
}

// Run runs checkers on c and returns their problems in checker order.
func Run(c *Checkpoint, checkers []Checker) []Problem {
	var ps []Problem
	for _, ch := range checkers {
		ps = append(ps, ch.Run(c)...)
	}
	return ps
}

// loading returns the problems the loader reported: a weight map naming
// a shard that is missing or unreadable, a tensor its shard lacks; a
// shard holding a tensor the map lacks or puts elsewhere.
func loading(c *Checkpoint) []Problem { return c.Loading }

// unserved reports each entry the checkpoint holds that tensorfs lists
// but does not serve (index.Unserved): a type it cannot read.
func unserved(c *Checkpoint) []Problem {
	var ps []Problem
	for _, u := range c.Index.Unserved {
		ps = append(ps, Problem{
			File:  c.Index.SourceName(u.Source),
			Where: "tensor " + strconv.Quote(u.Name),
			What:  fmt.Sprintf("not served (%s): %s", u.Type, u.Why),
		})
	}
	return ps
}

// ranges checks every tensor against its source as it is now: its
// dtype, shape and size agree, and its bytes lie inside the source
// (index.CheckTensor, which loading ran once; a file that has shrunk
// since, or a remote object that changed, fails here).
func ranges(c *Checkpoint) []Problem {
	var ps []Problem
	for i := range c.Index.Tensors {
		t := &c.Index.Tensors[i]
		if t.Source < 0 || t.Source >= len(c.Sources) {
			ps = append(ps, Problem{Where: "tensor " + strconv.Quote(t.Name), What: fmt.Sprintf("source %d of %d", t.Source, len(c.Sources))})
			continue
		}
		if err := index.CheckTensor(t, c.Index.SourceName(t.Source), c.Sources[t.Source].Size()); err != nil {
			ps = append(ps, FromError(err))
		}
	}
	return ps
}

// quantized checks a quantized checkpoint's weights against its scheme
// (index.Index.Quantization, made by the loader through package quant):
// every weight has its parts, of the dtypes and shapes its scheme needs
// (each weight the loader left out of the converted views is a problem);
// the scheme the configuration names is the one the tensors are stored
// in (a method named but no weight stored by it; an FP8 tensor that is
// no part of any weight, whose codes would be read unscaled).
func quantized(c *Checkpoint) []Problem {
	q := c.Index.Quantization
	if q == nil {
		return nil
	}
	var ps []Problem
	fileOf := func(name string) string {
		for i := range c.Index.Tensors {
			if t := &c.Index.Tensors[i]; t.Name == name && t.Role != index.RoleLogical {
				return c.Index.SourceName(c.Index.FileOf(t.Source))
			}
		}
		return c.Source
	}
	for _, p := range q.Problems {
		ps = append(ps, Problem{File: fileOf(p.Name), Where: "weight " + strconv.Quote(p.Name), What: "left out of the converted views: " + p.Why})
	}
	if q.Method != "" && len(q.Weights) == 0 && len(q.Problems) == 0 {
		ps = append(ps, Problem{File: c.Source, Where: q.Config, What: fmt.Sprintf("names quantization method %q, but no tensor is stored by it (no weight with the parts it needs)", q.Method)})
	}
	if q.Method != "" {
		for i := range c.Index.Tensors {
			t := &c.Index.Tensors[i]
			if t.Role == index.RoleStored && (t.DType == dtype.F8E4M3 || t.DType == dtype.F8E5M2) {
				ps = append(ps, Problem{File: c.Index.SourceName(c.Index.FileOf(t.Source)), Where: "tensor " + strconv.Quote(t.Name),
					What: fmt.Sprintf("stored as %s but no part of a weight of the configured scheme (%s): its codes would be read unscaled", t.DType, q.Method)})
			}
		}
	}
	return ps
}
