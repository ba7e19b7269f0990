package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	tfsource "github.com/lazyweights/tensorfs/source"
)

var lsAbout = "\n" + para("Lists the tensors of SOURCE without mounting: one line per tensor in name order with its name, dtype, shape and size in bytes (of the stored representation). With --json, prints the index document instead: the same JSON a mount serves as .tensorfs/index.json.") + "\n\n" +
	para("SOURCE is a checkpoint file or a directory holding one: "+formats.DetailList()+"; the format is detected from the content, not the name.") + "\n\n" +
	para("`tensorfs ls ollama://` lists the models of Ollama's local store instead (name as `ollama list` shows it, gguf or tensors, layers, bytes); each is a SOURCE as ollama://NAME[:TAG].")

func runLs(args []string) error {
	f := newFlags("ls", "[--json] SOURCE", lsAbout)
	addRemoteFlags(f)
	asJSON := f.Bool("json", false, "print the index document (format, sources, metadata, tensors) as JSON")
	if err := f.parse(args, 1, 1); err != nil {
		return err
	}
	if strings.EqualFold(f.Arg(0), tfsource.OllamaPrefix) {
		return lsOllama(*asJSON)
	}
	ckpt, err := openSource(f.Arg(0), sourceOptions{Mode: backing.Pread})
	if err != nil {
		return err
	}
	defer ckpt.close()
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	if *asJSON {
		if err := ckpt.idx.Document().WriteIndexJSON(out); err != nil {
			return err
		}
		return flush(out)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDTYPE\tSHAPE\tBYTES")
	for i := range ckpt.idx.Tensors {
		t := &ckpt.idx.Tensors[i]
		if !t.Listed(false) {
			continue // a logical tensor: in the converted views only
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", displayName(t.Name), t.DType, shapeString(t.Shape), t.Size)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return flush(out)
}

// lsOllama is `tensorfs ls ollama://`: the models of Ollama's store, one
// line each (NAME, WEIGHTS, LAYERS, BYTES), or as JSON.
func lsOllama(asJSON bool) error {
	root, models, err := tfsource.OllamaModels()
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	if asJSON {
		if models == nil {
			models = []tfsource.OllamaModel{}
		}
		b, err := json.MarshalIndent(map[string]any{"store": root, "models": models}, "", "  ")
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
		return flush(out)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWEIGHTS\tLAYERS\tBYTES")
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", displayName(m.Name), m.Weights, m.Layers, m.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := flush(out); err != nil {
		return err
	}
	for _, m := range models {
		if m.Problem != "" {
			fmt.Fprintf(os.Stderr, "tensorfs: ls: %s: %s\n", m.Name, m.Problem)
		}
	}
	if len(models) == 0 {
		fmt.Fprintf(os.Stderr, "tensorfs: ls: no models in the Ollama store %s\n", root)
	}
	return nil
}

// flush flushes stdout; a write error (a full disk, not a closed pipe,
// which ends the process with SIGPIPE) is an error.
func flush(w *bufio.Writer) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing to stdout: %v", err)
	}
	return nil
}

// displayName is a tensor name as the table shows it: as it is, or
// Go-quoted when it is empty, has spaces at either end, or holds control
// characters or bytes that are not UTF-8 (it would break the table).
func displayName(name string) string {
	if name == "" || strings.TrimSpace(name) != name || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) || strings.HasPrefix(name, `"`) {
		return strconv.Quote(name)
	}
	return name
}

// shapeString formats a shape as JSON: [4096,11008], [] for a scalar.
func shapeString(shape []int64) string {
	b := []byte{'['}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
