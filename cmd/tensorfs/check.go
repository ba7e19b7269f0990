package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/check"
	"github.com/lazyweights/tensorfs/index"
)

const checkAbout = `
Checks that SOURCE is whole and consistent, without reading the tensors'
bytes: a weight map names only shards that exist and can be read, every
tensor it names is in the shard it names, and no shard holds a tensor the
map lacks; every entry is served (none of a type tensorfs cannot read);
every tensor's bytes lie inside its file; a quantized checkpoint's
weights each have the parts their scheme needs, of the dtypes and shapes
it needs, and the scheme its configuration names (config.json's
quantization_config, hf_quant_config.json, quantize_config.json) is the
one its tensors are stored in (docs/QUANT.md). Every problem is found, not only
the first: one line each on stderr, "tensorfs: check: FILE: PROBLEM
(WHERE)", and the exit status is 1. With none, one line on stdout says
what was checked (tensors, files, format, bytes) and the exit status is 0.

--data also reads every byte of every tensor: a read that fails (a
truncated file, a compressed member that does not inflate, a remote
object changed since it was opened), a stored .npz member whose CRC-32
does not match and an ONNX tensor whose external data differs from the
SHA-1 its model states (external_data "checksum") are problems. A file whose source states the sha256 of its
whole bytes (an hf:// file in Git LFS: the Hub's X-Linked-Etag, its LFS
oid; an ollama:// blob or an oci:// layer: its sha256 digest) is read whole and hashed: a digest that differs is a problem naming
the file and both digests. An oci:// artifact's every layer is: a raw
layer as its file (config.json and the other files beside the
checkpoint too), an uncompressed .tar layer as its whole blob (named
SOURCE@sha256:HEX/blobs/DIGEST: its tar headers and padding too), the
manifest's config blob (named so too), a .tar+gzip or .tar+zstd layer
as it is decoded, when it is opened. --json prints a JSON report on stdout
instead of the summary line (the problems too, and with --data, each
floating-point or quantized tensor's NaN and Inf counts on its values as
the .f32/ view converts them).`

// checkReport is the --json output of check.
type checkReport struct {
	Source   string          `json:"source"`
	OK       bool            `json:"ok"`
	Format   string          `json:"format,omitempty"`
	Files    int             `json:"files"`
	Tensors  int             `json:"tensors"`
	Bytes    int64           `json:"bytes"`
	Problems []check.Problem `json:"problems"`
	// With --data: what was read.
	Data *checkData `json:"data,omitempty"`
}

type checkData struct {
	// BytesRead are the checkpoint's bytes read (check.DataReport.Bytes):
	// the stored tensors', and more where a digest covers more (a zip
	// member's header, a file hashed whole).
	BytesRead int64 `json:"bytes_read"`
	// Dequantized are the quantized weights read as their float32
	// values, DequantizedBytes those values (not counted in BytesRead).
	Dequantized      int                  `json:"dequantized_weights"`
	DequantizedBytes int64                `json:"dequantized_bytes"`
	CRCs             int                  `json:"crc32_checked"`
	SHA1s            int                  `json:"sha1_checked"`
	Values           []check.TensorValues `json:"values"`
	// Files are the files hashed whole against the sha256 their source
	// states (per file "sha256 ok", "sha256 mismatch", "read error").
	Files []check.FileDigest `json:"files"`
}

func runCheck(args []string) error {
	f := newFlags("check", "[--data] [--json] SOURCE", checkAbout)
	addRemoteFlags(f)
	data := f.Bool("data", false, "also read every byte of every tensor: read errors, stored .npz members' CRC-32s, ONNX external data's SHA-1s and whole files' sha256 where the source states it (hf:// LFS files, ollama:// blobs, oci:// layers) (and NaN/Inf counts with --json)")
	asJSON := f.Bool("json", false, "print a JSON report (summary, problems; with --data, NaN and Inf counts per floating-point tensor) on stdout")
	if err := f.parse(args, 1, 1); err != nil {
		return err
	}
	source := f.Arg(0)
	rep := checkReport{Source: source, Problems: []check.Problem{}}
	var loading []check.Problem
	ckpt, err := openSource(source, sourceOptions{Mode: backing.Pread, Report: func(err error) {
		loading = append(loading, check.FromError(err))
	}})
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return err
	case err != nil:
		// Nothing to check beyond what stopped loading.
		rep.Problems = append(append(rep.Problems, loading...), check.FromError(err))
	default:
		defer ckpt.close()
		logNotes(notesNotChecked(ckpt.idx))
		c := &check.Checkpoint{Source: source, Index: ckpt.idx, Sources: ckpt.sources, Loading: loading}
		if ckpt.loaded != nil {
			c.SHA256 = ckpt.loaded.SHA256
			if *data {
				files, err := ckpt.loaded.DigestedFiles(context.Background())
				if err != nil {
					rep.Problems = append(rep.Problems, check.FromError(err))
				}
				for _, f := range files {
					c.Beside = append(c.Beside, check.DigestedFile{Src: f.Src, SHA256: f.SHA256})
				}
			}
		}
		rep.Format = ckpt.idx.Format
		for i, s := range ckpt.idx.Sources {
			if s != "" || ckpt.idx.Member(i) == nil {
				rep.Files++
			}
		}
		for i := range ckpt.idx.Tensors {
			if t := &ckpt.idx.Tensors[i]; t.Listed(false) { // stored, not a quantized weight's values
				rep.Tensors++
				rep.Bytes += t.Size
			}
		}
		rep.Problems = append(rep.Problems, check.Run(c, check.Checkers)...)
		if *data {
			dr, ps := check.Data(c, check.DataOptions{Values: *asJSON})
			rep.Problems = append(rep.Problems, ps...)
			rep.Data = &checkData{BytesRead: dr.Bytes, Dequantized: dr.Dequantized, DequantizedBytes: dr.DequantizedBytes, CRCs: dr.CRCs, SHA1s: dr.SHA1s, Values: dr.Tensors, Files: dr.Files}
			if rep.Data.Values == nil {
				rep.Data.Values = []check.TensorValues{}
			}
			if rep.Data.Files == nil {
				rep.Data.Files = []check.FileDigest{}
			}
		}
	}
	rep.OK = len(rep.Problems) == 0
	for _, p := range rep.Problems {
		fmt.Fprintln(os.Stderr, "tensorfs: check: "+oneLine(p.String()))
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing to stdout: %v", err)
		}
	case rep.OK:
		line := fmt.Sprintf("%s: ok: %s in %s (%s), %d bytes of tensors", source, plural(rep.Tensors, "tensor"), plural(rep.Files, "file"), rep.Format, rep.Bytes)
		if rep.Data != nil {
			line += fmt.Sprintf("; every byte read (%d bytes", rep.Data.BytesRead)
			if rep.Data.CRCs > 0 {
				line += fmt.Sprintf(", %s checked", plural(rep.Data.CRCs, "CRC-32"))
			}
			if rep.Data.SHA1s > 0 {
				line += fmt.Sprintf(", %s checked", plural(rep.Data.SHA1s, "SHA-1"))
			}
			if n := len(rep.Data.Files); n > 0 {
				line += fmt.Sprintf(", %s verified by sha256", plural(n, "file"))
			}
			if rep.Data.BytesRead > rep.Bytes {
				line += fmt.Sprintf("; %d bytes more than the tensors hold: %s", rep.Data.BytesRead-rep.Bytes, checkedWhole(rep.Data))
			}
			line += ")"
			if n := rep.Data.Dequantized; n > 0 {
				line += fmt.Sprintf("; %s dequantized too, to %d bytes of float32 values", plural(n, "quantized weight"), rep.Data.DequantizedBytes)
			}
		}
		fmt.Println(oneLine(line))
	}
	if !rep.OK {
		return errReported
	}
	return nil
}

// checkedWhole says what --data read beyond the tensors' bytes: what its
// digests cover.
func checkedWhole(d *checkData) string {
	var why []string
	if len(d.Files) > 0 {
		why = append(why, "files hashed whole for their sha256")
	}
	if d.CRCs > 0 {
		why = append(why, "zip members read whole, headers too, for their CRC-32")
	}
	if d.SHA1s > 0 {
		why = append(why, "ONNX external data read whole for its SHA-1")
	}
	if len(why) == 0 {
		return "ranges read more than once"
	}
	return strings.Join(why, ", ")
}

// notesNotChecked are idx's notes without those check reports as
// problems itself (a quantized weight left out of the converted views:
// check.Checkers' "quantized weights"), so that each is said once.
func notesNotChecked(idx *index.Index) []string {
	q := idx.Quantization
	if q == nil || len(q.Problems) == 0 {
		return idx.Notes
	}
	said := map[string]bool{}
	for _, p := range q.Problems {
		said[index.Printable(fmt.Sprintf("weight %s left out of the converted views: %s", strconv.Quote(p.Name), p.Why))] = true
	}
	var notes []string
	for _, n := range idx.Notes {
		if _, rest, ok := strings.Cut(n, ": weight "); ok && said["weight "+rest] {
			continue
		}
		notes = append(notes, n)
	}
	return notes
}
