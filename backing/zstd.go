package backing

import (
	"errors"
	"io"

	"github.com/klauspost/compress/zstd"
)

// ZstdMaxWindow is the largest zstd window a decoder accepts: what
// zstd's levels 1-19 use (8 MiB) and more; a stream asking for more is
// refused rather than given the memory.
const ZstdMaxWindow = 32 << 20

// NewZstdReader decodes the zstd stream r (frames end to end) in one
// goroutine, with a window of at most ZstdMaxWindow: its memory is
// bounded whatever the stream says. Close releases it.
func NewZstdReader(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(ZstdMaxWindow), zstd.WithDecoderMaxMemory(1<<40))
}

// zstdCause says what a zstd decoder's error is, in a few words.
func zstdCause(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the stream ends early"
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return "its window is larger than the 32 MiB tensorfs allows"
	}
	return err.Error()
}
