package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/client/cuda"
	"github.com/lazyweights/tensorfs/dtype"
)

// gpuLoad is what `tensorfs load --gpu N` was asked to do.
type gpuLoad struct {
	source                           string
	device                           int
	to                               dtype.DType
	verify, quiet                    bool
	workers, buffers, streams, chunk int
	writeCombined, register          bool
	rules                            []splitRule
	parts, part                      int
	io                               string
	ioSet                            bool
	cpuProfile                       string
}

// loadGPU uploads a checkpoint to a CUDA device with client/cuda and
// reports what it did.
func loadGPU(f *flags, g gpuLoad) error {
	read, mode, err := g.readPath()
	if err != nil {
		return err
	}
	if err := loadChecks(g.source); err != nil {
		return err
	}
	rt, err := openGPU(fmt.Sprintf("load --gpu %d", g.device), g.device)
	if err != nil {
		return err
	}
	defer rt.Close()

	ck, done, err := openLoad(g.source, mode, g.cpuProfile, g.ioSet)
	if err != nil {
		return err
	}
	defer done()
	tensors := ck.TensorsIn(g.to)
	unserved := ck.Unserved()
	var split func(client.TensorInfo) *client.Split
	nsplit := 0
	if g.rules != nil {
		if split, nsplit, err = splitPlan(ck, g.rules, g.parts, g.part); err != nil {
			return err
		}
	}
	opts := cuda.UploadOptions{
		Split:  split,
		Device: g.device, DType: g.to, Read: read,
		Workers: g.workers, Buffers: g.buffers, Streams: g.streams, ChunkSize: g.chunk,
		Cacheable: !g.writeCombined, Register: g.register,
	}.Defaults()
	if !g.quiet {
		if progress, done := gpuProgress(ck, tensors, g.to, g.device); progress != nil {
			opts.Progress = progress
			defer done()
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mem := startLoadMemSampler(10 * time.Millisecond)
	start := time.Now()
	u, err := cuda.UploadCheckpoint(ctx, rt, ck, opts)
	elapsed := time.Since(start)
	peakAnon, hwm := mem.stop()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: interrupted; nothing is left on cuda:%d", g.source, g.device)
		}
		return err
	}
	defer u.Free()
	if !g.quiet {
		g.report(u, elapsed, peakAnon, hwm, nsplit)
	}
	if td, err := u.Teardown(); err != nil {
		return fmt.Errorf("%s: freeing the staging buffers: %v", g.source, err)
	} else if !g.quiet {
		fmt.Fprintf(os.Stderr, "staging freed after the upload in %.3f s\n", td.Seconds())
	}
	if g.verify {
		if err := g.verifyUpload(ctx, u, ck, opts); err != nil {
			return err
		}
	}
	if len(unserved) > 0 { // the rest is on the device; the checkpoint is not whole
		return fmt.Errorf("load: %s: %s not uploaded: %s", g.source, plural(unservedCount(unserved), "tensor"), unservedNames(unserved))
	}
	return nil
}

// readPath is how the upload reads the checkpoint's files (--io, auto
// by default) and the mode they are opened in; --io pread with
// --register is a usage error.
func (g gpuLoad) readPath() (client.ReadPath, backing.Mode, error) {
	read, mode := client.ReadAuto, backing.Pread
	if g.register || g.to != dtype.Invalid {
		// Registration needs the file's mapping; conversions read the
		// source in small steps, cheaper from a mapping than by pread
		// (measured: docs/BENCHMARKS.md).
		mode = backing.Mmap
	}
	if g.ioSet {
		switch strings.ToLower(strings.TrimSpace(g.io)) {
		case "auto":
		case "pread":
			if g.register {
				return read, mode, usagef("load: --register copies from the file's mapping: it does not go with --io pread")
			}
			read, mode = client.ReadCached, backing.Pread
		case "mmap":
			read, mode = client.ReadCached, backing.Mmap
		case "direct":
			read = client.ReadDirect
		default:
			return read, mode, usagef("load: --io: unknown mode %q (want auto, pread, mmap or direct)", g.io)
		}
	}
	return read, mode, nil
}

// report says what the upload u did (in elapsed, with the host's peak
// memory peakAnon and hwm): its rate, staging, device memory, how each
// file was read and, with --split, how many tensors were split.
func (g gpuLoad) report(u *cuda.Upload, elapsed time.Duration, peakAnon, hwm int64, nsplit int) {
	st := u.Stats
	staging := "no staging buffers"
	if st.PinnedBytes > 0 {
		staging = fmt.Sprintf("staging %d goroutines, %d x %s pinned", st.Workers, st.Buffers, bytesize.Format(int64(st.ChunkSize)))
	}
	if st.WriteCombined {
		staging += " write-combined"
	}
	staging += fmt.Sprintf(", %d streams", st.Streams)
	if st.RegisteredBytes > 0 {
		staging += fmt.Sprintf("; %s copied from the registered mapping (registering %.3f s)", bytesize.Format(st.RegisteredBytes), st.Register.Seconds())
	}
	fmt.Fprintf(os.Stderr, "uploaded %s to cuda:%d: %s (%s) in %.3f s, %.2f GB/s (setup %.3f s, copying %.3f s at %.2f GB/s); device memory %s in one allocation; %s; peak host memory %s anonymous (RssAnon), %s resident (VmHWM)\n",
		plural(len(u.Tensors), "tensor"), g.device, plural(int(st.Bytes), "byte"), bytesize.Format(st.Bytes),
		elapsed.Seconds(), float64(st.Bytes)/elapsed.Seconds()/1e9, st.Setup.Seconds(), st.Elapsed.Seconds(), st.GBps(),
		bytesize.Format(u.Bytes), staging, bytesize.Format(peakAnon), bytesize.Format(hwm))
	for _, fr := range st.Fill.Files {
		fmt.Fprintf(os.Stderr, "read %s: %s\n", filepath.Base(fr.Source), describeRead(fr))
	}
	if g.rules != nil {
		fmt.Fprintf(os.Stderr, "part %d of %d: %s split, %s whole\n", g.part, g.parts, plural(nsplit, "tensor"), plural(len(u.Tensors)-nsplit, "tensor"))
	}
}

// verifyUpload copies every tensor of u back and compares its sha256
// with the host's (--verify), and says so.
func (g gpuLoad) verifyUpload(ctx context.Context, u *cuda.Upload, ck *client.Checkpoint, opts cuda.UploadOptions) error {
	vs, err := u.Verify(ctx, ck, opts.Workers, opts.ChunkSize)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: interrupted while verifying", g.source)
		}
		return err
	}
	if !g.quiet {
		fmt.Fprintf(os.Stderr, "verified %s on cuda:%d: the sha256 of every tensor copied back matches the host's (%s in %.3f s)\n",
			plural(vs.Tensors, "tensor"), g.device, bytesize.Format(vs.Bytes), vs.Elapsed.Seconds())
	}
	return nil
}

// describeRead says how a file was read: "page cache (98% resident)",
// "O_DIRECT (2% resident)", with the reason when it is not what was asked.
func describeRead(fr client.FileRead) string {
	s := fr.Path.String()
	if fr.Resident >= 0 {
		s += fmt.Sprintf(" (%.0f%% resident before)", 100*fr.Resident)
	}
	s += ", " + bytesize.Format(fr.Bytes)
	if fr.Note != "" {
		s += "; not O_DIRECT: " + fr.Note
	}
	return s
}

// openGPU loads the CUDA runtime and checks device dev for what (the
// command, for messages): one line saying which is missing, if anything
// is. It creates the device's context, so that uploads are timed without
// it.
func openGPU(what string, dev int) (*cuda.Runtime, error) {
	if !cuda.CgoEnabled {
		return nil, fmt.Errorf("%s: this tensorfs was built without cgo (CGO_ENABLED=0); GPU upload needs a build with cgo and a C compiler (CUDA itself is found at run time)", what)
	}
	rt, err := cuda.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	n, err := rt.DeviceCount()
	if err == nil && dev >= n {
		err = fmt.Errorf("no CUDA device %d: the machine has %s", dev, plural(n, "CUDA device"))
	} else if err != nil {
		err = fmt.Errorf("no usable CUDA device: %v", err)
	} else {
		_, _, _, err = rt.MemInfo(dev)
	}
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	return rt, nil
}

// gpuProgress returns a progress callback drawing a bar on a terminal,
// and the function that clears it; nil when stderr is no terminal.
func gpuProgress(ck *client.Checkpoint, tensors []client.TensorInfo, to dtype.DType, dev int) (func(int64), func()) {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil, nil
	}
	bar := newLoadBar(ck, tensors, to)
	bar.Describe(fmt.Sprintf("%s to cuda:%d", plural(len(tensors), "tensor"), dev))
	return func(n int64) { bar.Add64(n) }, func() {
		bar.Finish()
		bar.Clear()
		fmt.Fprint(os.Stderr, "\r")
	}
}
