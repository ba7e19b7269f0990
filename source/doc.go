// Package source opens a SOURCE, the one thing every command and the Go
// client are given: a checkpoint file, a directory holding a sharded
// checkpoint, a remote checkpoint (s3://BUCKET/KEY, s3://BUCKET/PREFIX/,
// hf://ORG/NAME[@REV][/PATH], http(s)://HOST/PATH), a model of Ollama's
// local store (ollama://NAME[:TAG], read in place: loadOllama, package
// source/ollama), or a tensorfs mount point, which IsMount
// recognises (its reader is the caller's: the Go client reads a mount,
// the CLI refuses one).
//
// Load parses and validates a checkpoint completely (formats.Load for a
// local path, formats.LoadTree over a remote.Client for a remote one) and
// returns its index with one open backing.Source per index source. Errors
// are the loader's and the stores' one-line messages, as they are.
//
// The S3 store is injected: Load opens s3:// only with
// RemoteOptions.S3 set (backing/s3.Open is one), so that a program that
// imports this package, or the Go client, links the AWS SDK only when it
// asks for s3:// itself. An s3:// SOURCE without it fails with one line
// that says how to enable it. hf:// (backing/hf) and http(s)://
// (backing/httpsrc) need nothing.
//
// The remote schemes are one table, Schemes (prefix, help, its own
// options, whether the store lists, opener): IsRemote, Load's store, the
// commands' remote flags and every help text naming the schemes (Table's
// Names, Forms, Help; the CLI generates its flags from each row's
// Options), docs/CLI.md's rows of the schemes and the files a mount
// exports beside a remote checkpoint (Checkpoint.RemoteKey,
// RemoteListable) all follow it; a new scheme is one row and one
// remote.Store, or, for a scheme that names local files (ollama://), one
// row whose Load loads the checkpoint itself.
//
// Layers: source sits above index and backing (and backing/remote,
// backing/httpsrc) and below view, fs, client and cmd/tensorfs; nothing
// below it imports it.
package source
