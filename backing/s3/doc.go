// Package s3 reads objects of an S3-compatible store for backing/remote:
// a remote.Store over the AWS SDK for Go v2. It is the only package that
// imports the SDK.
//
// Configuration is the SDK's default chain, as the aws CLI reads it:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_REGION, AWS_PROFILE and the shared config and credentials files
// (SSO, assume-role, process credentials), AWS_ENDPOINT_URL_S3 and
// AWS_ENDPOINT_URL. With an endpoint configured, requests use path-style
// addressing (what MinIO, versitygw, Ceph and most S3-compatible stores
// want). With no region configured, us-east-1. NoSign sends anonymous
// requests (public buckets).
//
// The SDK's own retries are off: backing/remote retries with its own
// backoff and deadline, so that a read's time is bounded in one place.
// Errors never hold credentials: they carry the HTTP status, the S3 error
// code and message, and the object's s3:// URL.
package s3
