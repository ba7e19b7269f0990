// Package zstdpool is tensorfs's one zstd decoder policy: every zstd
// stream it reads (a distributed checkpoint's items when it is parsed, a
// zstd member when it is served) is decoded in one goroutine with a
// window of at most MaxWindow, by a decoder taken from one pool. Building
// a decoder costs milliseconds (its tables and buffers), resetting one
// microseconds: a checkpoint of thousands of small zstd items is parsed
// by a few decoders, not one each. It is a leaf (klauspost/compress
// only), for every layer.
package zstdpool

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// MaxWindow is the largest zstd window a decoder accepts: what zstd's
// levels 1-19 use (8 MiB) and more; a stream asking for more is refused
// rather than given the memory.
const MaxWindow = 32 << 20

// MaxIdle is how many decoders the pool keeps between streams; one
// returned beyond them is closed. Each keeps the buffers its last stream
// needed (at most MaxWindow and a block).
const MaxIdle = 4

var (
	mu    sync.Mutex
	idle  []*zstd.Decoder // GUARDED_BY(mu)
	built atomic.Int64
)

// Decoder decodes one zstd stream (frames end to end). Close gives its
// decoder back to the pool; a Decoder is not used after Close.
type Decoder struct {
	d *zstd.Decoder
}

// Read reads decoded bytes.
func (d *Decoder) Read(p []byte) (int, error) { return d.d.Read(p) }

// Close gives the decoder back to the pool. It may be called more than
// once.
func (d *Decoder) Close() error {
	if d.d == nil {
		return nil
	}
	zd := d.d
	d.d = nil
	if zd.Reset(nil) != nil { // drops its reference to the stream
		zd.Close()
		return nil
	}
	mu.Lock()
	if len(idle) < MaxIdle {
		idle = append(idle, zd)
		zd = nil
	}
	mu.Unlock()
	if zd != nil {
		zd.Close()
	}
	return nil
}

// NewReader returns a decoder of the zstd stream r, taken from the pool
// or built when the pool has none idle.
func NewReader(r io.Reader) (*Decoder, error) {
	mu.Lock()
	var zd *zstd.Decoder
	if n := len(idle); n > 0 {
		zd, idle = idle[n-1], idle[:n-1]
	}
	mu.Unlock()
	if zd == nil {
		var err error
		zd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(MaxWindow), zstd.WithDecoderMaxMemory(1<<40))
		if err != nil {
			return nil, err
		}
		built.Add(1)
	}
	if err := zd.Reset(r); err != nil {
		zd.Close()
		return nil, err
	}
	return &Decoder{d: zd}, nil
}

// Built is how many decoders the pool has built since the process
// started (tests count them).
func Built() int64 { return built.Load() }

// Cause says what a decoder's error is, in a few words.
func Cause(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the stream ends early"
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return fmt.Sprintf("its window is larger than the %d MiB tensorfs allows", MaxWindow>>20)
	}
	return err.Error()
}
