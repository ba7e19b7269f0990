package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/oci"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
)

// MountIndexPath is where a tensorfs mount publishes its index, relative
// to the mount point. IsMount recognises a mount by it.
const MountIndexPath = ".tensorfs/index.json"

// S3Func opens the store of one S3 bucket: noSign sends requests without
// credentials (public buckets); ro are the remote options the store's
// client will have (Parallel sizes its connection pool, Proxy is the
// cache tier its GETs go through, Logf says a failing tier once).
// backing/s3.Open is one.
type S3Func func(ctx context.Context, bucket string, noSign bool, ro remote.Options) (remote.Store, error)

// Options configure Load.
type Options struct {
	// Backing says how a local SOURCE's files are read.
	Backing backing.Options
	// Remote configures a remote SOURCE.
	Remote RemoteOptions
	// Inflate is the cache that compressed members (deflated .npz and
	// torch zip members) are decoded into on first read; nil means
	// backing.DefaultInflateCache(), the one the CLI's --inflate-* flags
	// configure.
	Inflate *backing.InflateCache
	// Report, when set, is given each problem of a weight map and its
	// shards, and loading goes on with what can be served
	// (formats.Options.Report): `tensorfs check`.
	Report func(error)
}

func (o *Options) formats() formats.Options {
	c := o.Inflate
	if c == nil {
		c = backing.DefaultInflateCache()
	}
	return formats.Options{Inflate: c, Report: o.Report}
}

// RemoteOptions configure a remote SOURCE (see Schemes); a scheme's own
// settings (NoSign, HF's CacheWrite, Remote.ProxyTerminatesTLS) are set
// by its Options, which the CLI's flags follow.
type RemoteOptions struct {
	Remote remote.Options
	// NoSign sends S3 requests without credentials (public buckets).
	NoSign bool
	// S3 opens an S3 bucket's store; nil refuses s3:// SOURCEs. Pass
	// backing/s3.Open to read them.
	S3 S3Func
	// HF configures hf:// SOURCEs; its zero value reads the environment
	// as huggingface_hub does (HF_ENDPOINT, HF_TOKEN, HF_HOME...). Proxy,
	// Logf and Conns are taken from Remote.
	HF hf.Options
	// InsecureRegistries are the oci:// registries (HOST[:PORT]) read
	// over plain HTTP off loopback (--insecure-registry).
	InsecureRegistries []string
}

// Checkpoint is a loaded SOURCE: its index and its open files.
type Checkpoint struct {
	Index *index.Index
	// Sources[i] reads Index.Sources[i].
	Sources []backing.Source
	// Remote is a remote SOURCE's client (listing, opening objects beside
	// the checkpoint), else nil.
	Remote *remote.Client
	// RemoteKey is the key in Remote's store that the SOURCE names (an
	// object, a prefix ending in '/', or "" for the whole store), and
	// RemoteListable whether that store lists (Scheme.Listable).
	RemoteKey      string
	RemoteListable bool

	path   string // the SOURCE Load was given
	beside *besideFiles
	// An ollama:// SOURCE's: each source's sha256 as the store names it
	// ("" for none), the metadata layers listed beside, and the
	// quantization its blobs name (nil: read the files beside).
	digests     []string
	ollama      bool
	quantPreset *quant.Config
	// An oci:// SOURCE's: its store's blobs that no file covers whole
	// (oci.Store.WholeBlobs), and those DigestedFiles opened (Close).
	ociWhole []string
	oci      bool
	digested []File
}

// SHA256 returns the sha256 (hex) that the SOURCE states for the whole
// bytes of Sources[i] (an ollama:// blob's digest); ok is false when it
// states none.
func (c *Checkpoint) SHA256(i int) (hex string, ok bool) {
	if i < 0 || i >= len(c.digests) || c.digests[i] == "" {
		return "", false
	}
	return c.digests[i], true
}

// Close closes the sources.
func (c *Checkpoint) Close() error {
	var first error
	for _, s := range c.Sources {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.Sources = nil
	closeBeside(c.digested)
	c.digested = nil
	if c.beside != nil {
		closeBeside(c.beside.files)
		c.beside = nil
	}
	if c.Remote != nil {
		if err := c.Remote.Close(); err != nil && first == nil {
			first = err
		}
		c.Remote = nil
	}
	return first
}

// IsRemote reports whether source names a remote checkpoint: it starts
// with the prefix of a row of Schemes (s3://, hf://, http://, https://,
// ollama://, oci://).
func IsRemote(source string) bool {
	_, ok := SchemeOf(source)
	return ok
}

// IsMount reports whether path is a tensorfs mount point: a directory
// holding MountIndexPath.
func IsMount(path string) bool {
	_, err := os.Stat(filepath.Join(path, MountIndexPath))
	return err == nil
}

// Load parses and validates the checkpoint at source (a local file or
// directory, or a remote SOURCE; see IsRemote) completely and returns it
// open, read as the model it encodes when it is quantized: the scheme
// named by the configuration beside it (QuantConfigFiles), its logical
// weights added to the index (formats.Quantize). A mount point is not a
// checkpoint: see IsMount.
func Load(ctx context.Context, source string, opts Options) (*Checkpoint, error) {
	var ck *Checkpoint
	var err error
	if sch, ok := SchemeOf(source); ok && sch.Load != nil {
		ck, err = sch.Load(ctx, source, opts)
	} else if IsRemote(source) {
		ck, err = loadRemote(ctx, source, opts.Remote, opts.formats())
	} else {
		ck, err = loadLocal(source, opts.Backing, opts.formats())
	}
	if err != nil {
		return nil, err
	}
	ck.path = source
	if ck.beside == nil {
		ck.beside = &besideFiles{}
	}
	if err := ck.quantize(ctx); err != nil {
		ck.Close()
		return nil, err
	}
	return ck, nil
}

// loadLocal loads a local file or directory, its files read in mode
// bopts and parsed through backing.ForParsing.
func loadLocal(path string, bopts backing.Options, fo formats.Options) (*Checkpoint, error) {
	idx, files, err := formats.Load(path, func(p string) (index.File, error) {
		s, err := backing.Open(p, bopts)
		if err != nil {
			return nil, err
		}
		return backing.ForParsing(s), nil
	}, fo)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		files[i] = backing.Unwrap(f) // served by the file, not its parsing view
	}
	return &Checkpoint{Index: idx, Sources: files}, nil
}

// loadRemote loads a remote SOURCE through ranged GETs. Errors are one
// line naming the source and the cause: a missing bucket, object or
// prefix, bad credentials, an unreachable endpoint (after OpenTimeout),
// a malformed checkpoint.
func loadRemote(ctx context.Context, source string, opts RemoteOptions, fo formats.Options) (*Checkpoint, error) {
	sch, ok := SchemeOf(source)
	if !ok {
		return nil, fmt.Errorf("%s: not a remote SOURCE", source)
	}
	store, key, err := sch.Open(ctx, source, opts)
	if err != nil {
		return nil, err
	}
	c, err := remote.New(store, opts.Remote)
	if err != nil {
		if cl, ok := store.(interface{ Close() error }); ok {
			cl.Close()
		}
		return nil, err
	}
	tree := remote.Tree{C: c, Ctx: ctx}
	open := func(p string) (index.File, error) {
		s, err := c.Open(ctx, remote.Key(p))
		if err != nil {
			return nil, err
		}
		return s.ForParsing(), nil
	}
	idx, files, err := formats.LoadTree(remote.Path(key), tree, open, fo)
	if err != nil {
		c.Close()
		return nil, err
	}
	for i, f := range files {
		if s, ok := remote.Unwrap(f); ok {
			files[i] = s // served by the remote file, not its parsing view; a member as it is
		}
	}
	ck := &Checkpoint{Index: idx, Sources: files, Remote: c, RemoteKey: key, RemoteListable: sch.Listable}
	if o, ok := store.(*oci.Store); ok {
		ck.oci, ck.ociWhole = true, o.WholeBlobs()
	}
	return ck, nil
}
