package source

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/httpsrc"
	"github.com/lazyweights/tensorfs/backing/oci"
	"github.com/lazyweights/tensorfs/backing/remote"
)

// Scheme is one kind of remote SOURCE: a row of the table (Schemes) that
// detection (IsRemote), the store (Load), the commands' flags and help,
// docs/CLI.md's row of the scheme and the files exported beside a
// checkpoint all follow. A new scheme is one row and one remote.Store.
type Scheme struct {
	// Prefix starts every SOURCE of the scheme, lower case ("s3://");
	// matched without regard to case.
	Prefix string
	// Help is the scheme's paragraph in the help of commands that take a
	// SOURCE: its grammar, credentials and environment.
	Help string
	// Forms are the SOURCEs of the scheme in short, as every command's
	// help names them (SchemeForms); "" where another row says them
	// (https:// in http://'s).
	Forms string
	// Name is the scheme as the help's lists name it ("s3://",
	// "http(s)://"); "" where another row says it.
	Name string
	// Doc is where the docs say the scheme in full: a page of docs/ and
	// its anchor ("REMOTE.md#hf-hugging-face-hub"), linked from
	// docs/CLI.md's row of the scheme.
	Doc string
	// Options are the scheme's own settings: each is a flag of every
	// command that takes a SOURCE, in the remote group of its help.
	Options []Option
	// Listable says that the store lists (Store.List): a SOURCE naming a
	// prefix or a weight map takes the files beside the checkpoint
	// (config.json, tokenizer files) along to the export, as a local
	// directory does.
	Listable bool
	// Open makes the store of source (which starts with Prefix) and
	// returns the key of the checkpoint in it ("" or a key ending in '/'
	// for the whole store or a prefix).
	Open func(ctx context.Context, source string, opts RemoteOptions) (st remote.Store, key string, err error)
	// Load, when set, loads source itself instead of Open's store: a
	// scheme that names local files (ollama://, a model of Ollama's
	// store, read in place).
	Load func(ctx context.Context, source string, opts Options) (*Checkpoint, error)
}

// Option is one setting of a scheme's reads (rclone's backend option):
// the commands that take a SOURCE have it as the flag --Name, and put
// its value into RemoteOptions with Set.
type Option struct {
	// Name is the flag's name, without "--" ("no-sign-request").
	Name string
	// Bool says that the flag is a switch (--NAME, value "true" or
	// "false"); else it takes a value, named in Help as `VALUE`.
	Bool bool
	// Env, when set, is the environment variable that gives the value
	// when the flag is not given; the help says it as the default.
	Env string
	// Help is the flag's line in the help, without the remote group's
	// "remote: " (a `VALUE` in back quotes names the flag's value).
	Help string
	// Set puts value into o; an error is the flag's usage error, said
	// after "--NAME: ".
	Set func(o *RemoteOptions, value string) error
}

// Table is a table of remote SOURCE schemes (Schemes); what the help
// and the docs say of the schemes is generated from it.
type Table []Scheme

// Schemes is the table of remote SOURCE schemes, in the order the help
// says them. The s3:// row is always there (so that an s3:// SOURCE is
// recognised, and refused in one line without an opener), but its store
// comes from RemoteOptions.S3: a program that does not pass one links no
// AWS SDK.
func Schemes() Table {
	return Table{
		{
			Prefix:   "s3://",
			Name:     "s3://",
			Forms:    "s3://BUCKET/KEY, s3://BUCKET/PREFIX/",
			Doc:      "REMOTE.md",
			Listable: true,
			Options: []Option{{
				Name: "no-sign-request", Bool: true,
				Help: "send S3 requests without credentials (public buckets)",
				Set:  func(o *RemoteOptions, v string) error { o.NoSign = v == "true"; return nil },
			}},
			Help: `s3://BUCKET/KEY, s3://BUCKET/PREFIX/ (a sharded checkpoint under a
prefix): credentials, region and endpoint from the standard AWS
configuration (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL,
~/.aws/config); --no-sign-request for public buckets.`,
			Open: openS3,
		},
		{
			Prefix:   "hf://",
			Name:     "hf://",
			Forms:    "hf://ORG/NAME[@REV][/PATH]",
			Doc:      "REMOTE.md#hf-hugging-face-hub-repositories",
			Listable: true,
			Options: []Option{{
				Name: "proxy-terminates-tls", Bool: true,
				Help: "the --proxy makes https:// requests itself: send it hf:// CDN GETs and oci:// blob GETs (a registry's redirects to its https:// storage) as absolute-form https:// URLs it can cache, not through CONNECT (docs/SCALE.md)",
				Set:  func(o *RemoteOptions, v string) error { o.Remote.ProxyTerminatesTLS = v == "true"; return nil },
			}, {
				Name: "hf-cache-write", Bool: true,
				Help: "put each hf:// file read whole into the local HF cache (HF_HUB_CACHE), checked against the Hub's sha256 or git sha1, as huggingface_hub lays it out, so that other tools and HF_HUB_OFFLINE find it; without it tensorfs never writes there",
				Set:  func(o *RemoteOptions, v string) error { o.HF.CacheWrite = v == "true"; return nil },
			}},
			Help: `hf://[models/|datasets/]ORG/NAME[@REV][/PATH]: a Hugging Face Hub
repository at a branch, tag, commit or refs/pr/N (default main), pinned to
its commit sha; HF_ENDPOINT, HF_TOKEN (or HF_TOKEN_PATH, $HF_HOME/token;
sent to the endpoint's host only), the HF cache (LLAMA_CACHE,
HF_HUB_CACHE, HF_HOME) read without a request, HF_HUB_OFFLINE=1 (the
cache only); when the Hub cannot be reached (no network, DNS, a refused
connection), a revision whose snapshot is in the HF cache is read from
there, as with HF_HUB_OFFLINE=1, with one line saying so.`,
			Open: openHF,
		},
		{
			Prefix: "http://",
			Name:   "http(s)://",
			Forms:  "an http(s):// URL",
			Doc:    "REMOTE.md",
			Help: `http://URL, https://URL: one file (or a *.index.json weight map
and its shards).`,
			Open: openHTTP,
		},
		{
			Prefix: "https://",
			Open:   openHTTP, // said in http://'s paragraph
		},
		{
			Prefix: OllamaPrefix,
			Name:   "ollama://",
			Forms:  "ollama://NAME[:TAG]",
			Doc:    "REMOTE.md#ollama-ollamas-local-model-store",
			Help: `ollama://NAME[:TAG], ollama://HOST/NAMESPACE/NAME:TAG: a model of
Ollama's local store ($OLLAMA_MODELS, else ~/.ollama/models, else
/usr/share/ollama/.ollama/models), read in place: a GGUF model is its blob,
an MLX-engine model its tensor blobs as one tree; the other layers
(template, params, license...) are the files beside it; check --data
verifies every blob against its sha256 digest; tensorfs ls ollama://
lists the store's models.`,
			Load: loadOllama,
		},
		{
			Prefix:   oci.Prefix,
			Name:     "oci://",
			Forms:    "oci://HOST/REPO[:TAG|@sha256:DIGEST]",
			Doc:      "REMOTE.md#oci-models-in-a-registry",
			Listable: true,
			Options: []Option{{
				Name: "insecure-registry",
				Help: "read oci:// from the registries `VALUE` (HOST[:PORT], comma-separated) over plain http, as docker's insecure-registries (a loopback registry is plain http without it); no credential is sent to one in clear",
				Set:  setInsecureRegistries,
			}},
			Help: `oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]: a model pushed to
a registry as an OCI artifact (CNCF ModelPack raw and .tar weight and
config layers, named by their org.cncf.model.filepath annotation; Docker Model
Runner GGUF or safetensors layers), pinned to its manifest's digest, its
blobs read with ranged GETs; credentials from $REGISTRY_AUTH_FILE, else
$DOCKER_CONFIG/config.json, else ~/.docker/config.json (Basic, or the
registry's Bearer token flow; a credential helper is named, not run: put
the credential in an auth file), else anonymous; over https (plain http to
a loopback registry or one named by --insecure-registry), no credential
ever sent in clear off loopback; check --data verifies every blob against
its digest.`,
			Open: openOCI,
		},
	}
}

// SchemeOf returns the row of source's scheme; ok is false for a local
// path.
func SchemeOf(source string) (Scheme, bool) { return Schemes().Of(source) }

// SchemeNames are the schemes as the help's lists name them, in table
// order: "s3://, hf://, http(s)://" (Schemes().Names()).
func SchemeNames() string { return Schemes().Names() }

// SchemeForms are the remote SOURCEs in short (Schemes().Forms()).
func SchemeForms() string { return Schemes().Forms() }

// RemoteHelp is the paragraph that the help of every command taking a
// SOURCE says about remote SOURCEs (Schemes().Help()).
func RemoteHelp() string { return Schemes().Help() }

// Names are the schemes as the help's lists name them, in table order:
// "s3://, hf://, http(s)://".
func (t Table) Names() string {
	var names []string
	for _, s := range t {
		if s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, ", ")
}

// Forms are the remote SOURCEs in short, in table order, as a list for
// a sentence: "s3://BUCKET/KEY, ..., hf://ORG/NAME[@REV][/PATH] or an
// http(s):// URL".
func (t Table) Forms() string {
	var forms []string
	for _, s := range t {
		if s.Forms != "" {
			forms = append(forms, s.Forms)
		}
	}
	if len(forms) < 2 {
		return strings.Join(forms, "")
	}
	return strings.Join(forms[:len(forms)-1], ", ") + " or " + forms[len(forms)-1]
}

// Help is the paragraph that the help of every command taking a SOURCE
// says about remote SOURCEs: one per scheme.
func (t Table) Help() string {
	var b strings.Builder
	b.WriteString("SOURCE may be remote, read with ranged GETs of --part-size parts, only the\nranges that are needed:\n")
	for _, s := range t {
		if s.Help != "" {
			b.WriteString("\n" + s.Help + "\n")
		}
	}
	b.WriteString("\n--proxy (or TENSORFS_PROXY) sends every GET through a cache tier\n(docs/SCALE.md).")
	return b.String()
}

// Of returns the row of source's scheme; ok is false for a local path.
func (t Table) Of(source string) (Scheme, bool) {
	l := strings.ToLower(source)
	for _, s := range t {
		if strings.HasPrefix(l, s.Prefix) {
			return s, true
		}
	}
	return Scheme{}, false
}

func openS3(ctx context.Context, source string, opts RemoteOptions) (remote.Store, string, error) {
	rest := source[len("s3://"):]
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return nil, "", fmt.Errorf("%s: no bucket (want s3://BUCKET/KEY or s3://BUCKET/PREFIX/)", source)
	}
	if opts.S3 == nil {
		return nil, "", fmt.Errorf("%s: s3:// is not enabled in this program: pass an S3 opener (source.RemoteOptions{S3: s3.Open}, package github.com/lazyweights/tensorfs/backing/s3)", source)
	}
	st, err := opts.S3(ctx, bucket, opts.NoSign, opts.Remote)
	if err != nil {
		return nil, "", err
	}
	return st, key, nil
}

func openHF(ctx context.Context, source string, opts RemoteOptions) (remote.Store, string, error) {
	o := opts.HF
	o.Proxy, o.Logf, o.Conns = opts.Remote.Proxy, opts.Remote.Logf, max(64, opts.Remote.Parallel)
	o.ProxyTerminatesTLS = opts.Remote.ProxyTerminatesTLS
	st, key, err := hf.Open(ctx, source, o)
	if err != nil {
		return nil, "", err
	}
	return st, key, nil
}

func openHTTP(ctx context.Context, source string, opts RemoteOptions) (remote.Store, string, error) {
	u, err := url.Parse(source)
	if err != nil {
		// Not err itself: it quotes the URL, whose query may be a
		// presigned signature.
		scheme, _, _ := strings.Cut(source, "://")
		return nil, "", fmt.Errorf("%s:// URL: not a valid URL", strings.ToLower(scheme))
	}
	return httpsrc.NewWith(u, httpsrc.Options{Proxy: opts.Remote.Proxy, Logf: opts.Remote.Logf})
}

func openOCI(ctx context.Context, source string, opts RemoteOptions) (remote.Store, string, error) {
	return oci.Open(ctx, source, ociOptions(source, opts))
}

// ociOptions are the oci.Options of source: Insecure when its registry
// is one of opts.InsecureRegistries.
func ociOptions(source string, opts RemoteOptions) oci.Options {
	o := oci.Options{Proxy: opts.Remote.Proxy, ProxyTerminatesTLS: opts.Remote.ProxyTerminatesTLS, Logf: opts.Remote.Logf}
	if ref, err := oci.ParseRef(source); err == nil {
		o.Insecure = slices.ContainsFunc(opts.InsecureRegistries, func(h string) bool { return strings.EqualFold(h, ref.Host) })
	}
	return o
}

// setInsecureRegistries is --insecure-registry's Set: HOST[:PORT], …
func setInsecureRegistries(o *RemoteOptions, v string) error {
	o.InsecureRegistries = nil
	for _, h := range strings.Split(v, ",") {
		h = strings.TrimSpace(h)
		if h == "" && v == "" {
			continue
		}
		if h == "" || strings.ContainsAny(h, "/@?# ") || strings.Contains(h, "://") {
			return fmt.Errorf("%q is not a registry HOST[:PORT] (a comma-separated list)", h)
		}
		o.InsecureRegistries = append(o.InsecureRegistries, h)
	}
	return nil
}
