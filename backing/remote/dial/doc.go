// Package dial opens a remote SOURCE (s3://BUCKET/KEY, s3://BUCKET/PREFIX/,
// http(s)://HOST/PATH) for the CLI and the Go client: it picks the store
// (backing/s3, backing/httpsrc), makes a remote.Client and loads the
// checkpoint through formats.LoadTree, parsing each file through a
// remote parse view. It is glue above backing and index; nothing below it
// imports it.
package dial
