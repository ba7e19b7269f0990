package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/client/cuda"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/fs"
)

// gpuMount is a checkpoint uploaded for `tensorfs mount --gpu N`: kept on
// the device while mounted, described in .cuda/index.json for other
// processes (CUDA IPC). fs/ serves the document; the device work stays
// here and in client/cuda.
type gpuMount struct {
	rt  *cuda.Runtime
	u   *cuda.Upload
	dir fs.ExtraDir
}

// uploadForMount uploads ckpt (converted to view, if set) to device dev
// before the mount exists, with the same code as load --gpu, and builds
// the .cuda/ directory. Interrupted, it frees everything.
func uploadForMount(source string, ckpt *checkpoint, view dtype.DType, dev int, allowOther bool, logger *log.Logger) (*gpuMount, error) {
	what := fmt.Sprintf("mount --gpu %d", dev)
	rt, err := openGPU(what, dev)
	if err != nil {
		return nil, err
	}
	g := &gpuMount{rt: rt}
	fail := func(err error) (*gpuMount, error) {
		g.close()
		return nil, err
	}
	if !rt.CanIPC() {
		return fail(fmt.Errorf("%s: %s has no CUDA IPC (cudaIpcGetMemHandle), which --gpu mounts need", what, rt.Path()))
	}
	if _, _, err := rt.DeviceUUID(dev); err != nil {
		return fail(fmt.Errorf("%s: %v", what, err))
	}
	// The upload reads local files by pread (measured: the mount's own
	// mapping, faulted in page by page, uploaded at 25.8 GB/s where load
	// --gpu's pread reached 40 GB/s on the same machine): each file the
	// mount serves is opened again for it from its descriptor, never by
	// name, so a checkpoint replaced (mv) since it was validated is not
	// uploaded in its place, and closed once uploaded. Compressed members
	// (any source that is no file of its own) and a remote checkpoint are
	// read through the mount's own sources, which the client then does
	// not own.
	files := ckpt.sources
	if ckpt.remote == nil {
		files = make([]backing.Source, len(ckpt.sources))
		defer func() {
			for i, f := range files {
				if f != nil && f != ckpt.sources[i] {
					f.Close()
				}
			}
		}()
		for i, src := range ckpt.sources {
			files[i], err = backing.Reopen(src, backing.Options{Mode: backing.Pread})
			if errors.Is(err, backing.ErrNotFile) {
				files[i], err = src, nil // a member, or made of other sources
			}
			if err != nil {
				return fail(err)
			}
		}
	}
	ck, err := client.FromIndex(source, ckpt.idx, files)
	if err != nil {
		return fail(err)
	}
	opts := cuda.UploadOptions{Device: dev, DType: view}.Defaults()
	if progress, done := gpuProgress(ck, ck.Tensors(), view, dev); progress != nil {
		opts.Progress = progress
		defer done()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	g.u, err = cuda.UploadCheckpoint(ctx, rt, ck, opts)
	elapsed := time.Since(start)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fail(fmt.Errorf("%s: interrupted while uploading; nothing is mounted or left on cuda:%d", source, dev))
		}
		return fail(err)
	}
	doc, err := g.u.IPCIndex(func(i int) string {
		t, _ := ck.Tensor(g.u.Tensors[i].Name)
		return t.Path
	})
	if err != nil {
		return fail(fmt.Errorf("%s: %v", what, err))
	}
	native := make([]bool, len(g.u.Tensors))
	for i, t := range g.u.Tensors {
		native[i] = view != dtype.Invalid && t.DType != view // left out of the converted top level
	}
	g.dir = fs.ExtraDir{Name: ".cuda", Render: cudaIndexFiles(doc, native), Private: !allowOther}
	st := g.u.Stats
	logger.Printf("uploaded %s to cuda:%d (%s): %s in %.3f s, %.2f GB/s; kept there while mounted, shared through %s", plural(len(g.u.Tensors), "tensor"), dev, doc.UUID, bytesize.Format(st.Bytes), elapsed.Seconds(), float64(st.Bytes)/elapsed.Seconds()/1e9, cuda.IPCIndexPath)
	return g, nil
}

// cudaIndexFiles makes .cuda/index.json from doc once the tree is built:
// each tensor's path is the one the mount serves it at (path, which has a
// tensor named as a model directory file at NAME#N: fs/modeldir.go),
// under .native/ where native[i] (a tensor left out of the converted top
// level).
func cudaIndexFiles(doc *cuda.IPCIndex, native []bool) func(path func(name string) string) (map[string][]byte, error) {
	return func(path func(name string) string) (map[string][]byte, error) {
		d := *doc
		d.Tensors = slices.Clone(doc.Tensors)
		for i := range d.Tensors {
			p := path(d.Tensors[i].Name)
			if i < len(native) && native[i] {
				p = nativeDir + "/" + p
			}
			d.Tensors[i].Path = p
		}
		data, err := json.MarshalIndent(&d, "", "  ")
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"index.json": append(data, '\n')}, nil
	}
}

// nativeDir is where a --dtype mount keeps the stored tree.
const nativeDir = ".native"

// close frees the device memory and unloads the runtime.
func (g *gpuMount) close() {
	if g.u != nil {
		g.u.Free()
		g.u = nil
	}
	if g.rt != nil {
		g.rt.Close()
		g.rt = nil
	}
}
