package source

import (
	"context"
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
)

// QuantConfigFiles are the files beside a checkpoint that can name its
// quantization scheme (quant.Find).
var QuantConfigFiles = quant.ConfigFiles

// maxConfigFile bounds the bytes read of one configuration file.
const maxConfigFile = 16 << 20

// quantize reads c as the model it encodes (formats.Quantize): the
// scheme from the configuration files beside it (Beside), for every
// SOURCE kind alike. A configuration that cannot be read is one note,
// and then only the unambiguous pairs are joined.
func (c *Checkpoint) quantize(ctx context.Context) error {
	cfg, err := c.quantConfig(ctx)
	if err != nil {
		c.Index.Notes = append(c.Index.Notes, index.Printable(fmt.Sprintf("%s: quantization configuration not read: %v", c.path, err)))
		cfg = nil
	}
	srcs, err := formats.Quantize(c.Index, c.Sources, cfg)
	if err != nil {
		return err
	}
	c.Sources = srcs
	return nil
}

// quantConfig returns the scheme the files beside c name, nil when none.
func (c *Checkpoint) quantConfig(ctx context.Context) (*quant.Config, error) {
	if c.ollama {
		return c.quantPreset, nil // the blobs name it, not the files beside
	}
	beside, err := c.BesideNamed(ctx, QuantConfigFiles...)
	if err != nil {
		return nil, err
	}
	defer closeBeside(beside)
	files := map[string][]byte{}
	for _, f := range beside {
		for _, n := range QuantConfigFiles {
			if f.Name != n {
				continue
			}
			if f.Src.Size() > maxConfigFile {
				return nil, fmt.Errorf("%s is %d bytes (over %d)", n, f.Src.Size(), maxConfigFile)
			}
			b := make([]byte, f.Src.Size())
			if k, err := f.Src.ReadAt(b, 0); k != len(b) {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("%s: %v", n, err)
			}
			files[n] = b
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	return quant.Find(files)
}
