package dial

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/httpsrc"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/index"
)

// Options configure Load.
type Options struct {
	Remote remote.Options
	// NoSign sends S3 requests without credentials (public buckets).
	NoSign bool
}

// IsRemote reports whether source names a remote checkpoint: it starts
// with s3://, http:// or https://.
func IsRemote(source string) bool {
	l := strings.ToLower(source)
	return strings.HasPrefix(l, "s3://") || strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// Load parses and validates the remote checkpoint source completely and
// returns its index and open sources (sources[i] reads idx.Sources[i],
// the objects' URLs). Errors are one line naming the source and the
// cause: a missing bucket, object or prefix, bad credentials, an
// unreachable endpoint (after OpenTimeout), a malformed checkpoint.
func Load(ctx context.Context, source string, opts Options) (*index.Index, []backing.Source, *remote.Client, error) {
	store, key, err := newStore(ctx, source, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := remote.New(store, opts.Remote)
	if err != nil {
		return nil, nil, nil, err
	}
	tree := remote.Tree{C: c, Ctx: ctx}
	open := func(p string) (index.File, error) {
		s, err := c.Open(ctx, remote.Key(p))
		if err != nil {
			return nil, err
		}
		return s.ForParsing(), nil
	}
	idx, files, err := index.LoadTree(remote.Path(key), tree, open)
	if err != nil {
		return nil, nil, nil, err
	}
	srcs := make([]backing.Source, len(files))
	for i, f := range files {
		if m := idx.Member(i); m != nil {
			// A compressed member, read through its remote file.
			if s, ok := f.(backing.Source); ok {
				srcs[i] = s
				continue
			}
		}
		s, ok := remote.Unwrap(f)
		if !ok {
			for _, f := range files {
				if c, ok := f.(interface{ Close() error }); ok {
					c.Close()
				}
			}
			return nil, nil, nil, fmt.Errorf("%s: internal error: the loader returned a %T", source, f)
		}
		srcs[i] = s
	}
	return idx, srcs, c, nil
}

// newStore parses source and makes its store.
func newStore(ctx context.Context, source string, opts Options) (remote.Store, string, error) {
	if l := strings.ToLower(source); strings.HasPrefix(l, "s3://") {
		rest := source[len("s3://"):]
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, "", fmt.Errorf("%s: no bucket (want s3://BUCKET/KEY or s3://BUCKET/PREFIX/)", source)
		}
		st, err := s3.New(ctx, bucket, s3.Options{NoSign: opts.NoSign, Conns: max(64, opts.Remote.Parallel), Proxy: opts.Remote.Proxy, Logf: opts.Remote.Logf})
		if err != nil {
			return nil, "", err
		}
		return st, key, nil
	}
	u, err := url.Parse(source)
	if err != nil {
		// Not err itself: it quotes the URL, whose query may be a
		// presigned signature.
		scheme, _, _ := strings.Cut(source, "://")
		return nil, "", fmt.Errorf("%s:// URL: not a valid URL", strings.ToLower(scheme))
	}
	st, key, err := httpsrc.NewWith(u, httpsrc.Options{Proxy: opts.Remote.Proxy, Logf: opts.Remote.Logf})
	if err != nil {
		return nil, "", err
	}
	return st, key, nil
}
