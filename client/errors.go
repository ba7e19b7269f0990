package client

import (
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/source"
)

// TensorError is an error reading or delivering one tensor. Its message is
// one line: `SOURCE: tensor "NAME": OP at byte OFF: what went wrong`,
// naming a remote SOURCE once (what went wrong does not say it again).
type TensorError struct {
	Source string // the checkpoint path given to Open
	Name   string // the tensor's name
	Op     string // "open", "plan", "read", "seek", "sink begin", "sink reclaim", "sink write", "sink end"
	Off    int64  // byte offset in the tensor's delivered bytes; -1 when none applies
	Err    error
}

func (e *TensorError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	b.WriteString("tensor ")
	b.WriteString(strconv.Quote(e.Name))
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.Off >= 0 {
		b.WriteString(" at byte ")
		b.WriteString(strconv.FormatInt(e.Off, 10))
	}
	b.WriteString(": ")
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
		// A remote store's error (a read's backing.FaultError) names
		// the object, which a one-file remote SOURCE is already: once
		// is enough.
		if source.IsRemote(e.Source) {
			msg = strings.TrimPrefix(msg, e.Source+": ")
		}
	}
	// One line, whatever a lower layer or a sink put in its message.
	b.WriteString(strings.ReplaceAll(msg, "\n", " "))
	return b.String()
}

func (e *TensorError) Unwrap() error { return e.Err }
