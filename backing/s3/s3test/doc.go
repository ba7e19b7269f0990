// Package s3test runs a real S3 server for tests: versitygw (its posix
// backend over a temporary directory) on a loopback port, started and
// stopped by the test. Without the versitygw binary, tests skip, or fail
// when CI is set. .ci/run installs it (go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0).
package s3test
