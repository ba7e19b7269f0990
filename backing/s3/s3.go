package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// Options configure New.
type Options struct {
	// NoSign sends requests without credentials (--no-sign-request).
	NoSign bool
	// Conns is the most idle connections kept to the endpoint (default
	// 64): at least the Client's Parallel.
	Conns int
	// Logf logs the one line said of each listed key that is skipped,
	// and the proxy's failure (default log.Printf).
	Logf func(format string, args ...any)
	// Proxy, when set, is an HTTP proxy (a cache tier) that the object's
	// GETs go through, presigned (see presign.go); when it fails in any
	// way they go to the endpoint directly (remote.TierTransport).
	Proxy *url.URL
}

// Store is one bucket.
type Store struct {
	client *s3.Client
	bucket string
	logf   func(format string, args ...any)
	// Behind a proxy: the presigner, and the client its GETs go
	// through. nil without one.
	presign *s3.PresignClient
	tier    *http.Client
}

var _ remote.Store = (*Store)(nil)

// New loads the AWS configuration and returns a Store of bucket.
func New(ctx context.Context, bucket string, opts Options) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3://: no bucket named")
	}
	conns := opts.Conns
	if conns <= 0 {
		conns = 64
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = conns
		t.MaxIdleConnsPerHost = conns
		t.ResponseHeaderTimeout = 30 * time.Second
	}).WithDialerOptions(func(d *net.Dialer) {
		d.Timeout = 5 * time.Second
	})
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithHTTPClient(httpClient),
		// The SDK logs warnings (an IMDS fallback, say) to stderr on its
		// own; every problem reaches the user as the one error line.
		config.WithLogger(logging.Nop{}),
	)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: AWS configuration: %v", bucket, err)
	}
	if !opts.NoSign {
		// Resolve the credentials once here (the SDK caches them): with
		// none in the environment, the shared files or an instance role,
		// the SDK's own error names only its last provider (often EC2
		// IMDS), which does not say what is missing.
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return nil, fmt.Errorf("s3://%s: no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; for a public bucket use --no-sign-request): %v", bucket, err)
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
			o.UsePathStyle = true
		}
		if opts.NoSign {
			o.Credentials = aws.AnonymousCredentials{}
		}
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	logf := opts.Logf
	if logf == nil {
		logf = log.Printf
	}
	st := &Store{client: client, bucket: bucket, logf: logf}
	if opts.Proxy != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = conns
		tr.MaxIdleConnsPerHost = conns
		tr.ResponseHeaderTimeout = 30 * time.Second
		tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.DisableCompression = true
		// S3 does not redirect a GET that it can serve; a redirect
		// would carry the signature elsewhere.
		noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		st.tier = &http.Client{Transport: remote.TierTransport(opts.Proxy, tr, noRedirect, logf), CheckRedirect: noRedirect}
		st.presign = s3.NewPresignClient(client)
	}
	return st, nil
}

// URL is s3://bucket/key.
func (s *Store) URL(key string) string { return "s3://" + s.bucket + "/" + key }

// Open reads the first len(head) bytes of key (one GET), or with an
// empty head only its metadata (HEAD).
func (s *Store) Open(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	if len(head) == 0 {
		out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return remote.Object{}, 0, s.error(key, err)
		}
		obj := remote.Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), Version: aws.ToString(out.VersionId)}
		if out.LastModified != nil {
			obj.LastModified = *out.LastModified
		}
		return obj, 0, nil
	}
	if s.presign != nil {
		return s.openPresigned(ctx, key, head)
	}
	rng := fmt.Sprintf("bytes=0-%d", len(head)-1)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
			return s.Open(ctx, key, nil) // an empty object
		}
		return remote.Object{}, 0, s.error(key, err)
	}
	defer out.Body.Close()
	obj := remote.Object{Key: key, ETag: aws.ToString(out.ETag), Version: aws.ToString(out.VersionId)}
	if out.LastModified != nil {
		obj.LastModified = *out.LastModified
	}
	return s.readHead(obj, head, aws.ToString(out.ContentRange), aws.ToInt64(out.ContentLength), out.Body)
}

// readHead checks an open's reply, of n bytes with Content-Range cr
// ("" for the whole object), against the request for len(head) bytes,
// and reads it into head; obj gets the object's size.
func (s *Store) readHead(obj remote.Object, head []byte, cr string, n int64, body io.Reader) (remote.Object, int, error) {
	obj.Size = n
	if cr != "" {
		// The reply must hold bytes 0 to len(head)-1, or the whole
		// object when it is shorter.
		first, last, total, ok := remote.ContentRange(cr)
		if !ok || first != 0 || last != min(total, int64(len(head)))-1 {
			return remote.Object{}, 0, &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for bytes 0-%d, the server answered with Content-Range %s", len(head)-1, strconv.Quote(cr))}
		}
		obj.Size = total
	}
	if n < 0 || n > int64(len(head)) || n > obj.Size {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes, the server sent %d", len(head), n)}
	}
	if _, err := io.ReadFull(body, head[:n]); err != nil {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(obj.Key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return obj, int(n), nil
}

// Get reads obj's bytes at off into bufs (one ranged GET), pinned by
// If-Match on the ETag and by the version id when the object has one.
func (s *Store) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	if want == 0 {
		return nil
	}
	if s.presign != nil {
		return s.getPresigned(ctx, obj, off, bufs, filled)
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+want-1)
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &obj.Key, Range: &rng}
	switch {
	case obj.ETag != "":
		in.IfMatch = aws.String(obj.ETag)
	case !obj.LastModified.IsZero():
		in.IfUnmodifiedSince = aws.Time(obj.LastModified)
	}
	if obj.Version != "" {
		in.VersionId = aws.String(obj.Version)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return s.error(obj.Key, err)
	}
	defer out.Body.Close()
	if e := aws.ToString(out.ETag); obj.ETag != "" && e != "" && e != obj.ETag {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Changed, Msg: fmt.Sprintf("ETag %s, was %s", e, obj.ETag)}
	}
	// A reply without Content-Range (a 200) is the whole object: right
	// only when that is what was asked.
	if cr := aws.ToString(out.ContentRange); cr != "" || off != 0 || want != obj.Size {
		if err := remote.CheckContentRange(s.URL(obj.Key), cr, off, want, obj.Size); err != nil {
			return err
		}
	}
	if n := aws.ToInt64(out.ContentLength); n != want {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, n)}
	}
	if err := remote.ReadBufs(out.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
}

// maxList bounds the objects listed under one prefix.
const maxList = 100000

// List lists the objects directly under prefix (delimiter '/').
func (s *Store) List(ctx context.Context, prefix string) ([]remote.Entry, bool, error) {
	// Keys are asked for URL-encoded: XML 1.0 cannot carry most control
	// characters, and one such key would fail the whole listing.
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, Delimiter: aws.String("/"), EncodingType: types.EncodingTypeUrl}
	var out []remote.Entry
	any := false
	for {
		page, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, false, s.error(prefix, err)
		}
		if len(page.CommonPrefixes) > 0 {
			any = true
		}
		for _, o := range page.Contents {
			any = true
			key := aws.ToString(o.Key)
			if page.EncodingType == types.EncodingTypeUrl {
				k, err := url.QueryUnescape(key)
				if err != nil {
					s.logf("tensorfs: %s: skipped: the server listed it with a bad URL encoding", s.URL(strconv.Quote(key)))
					continue
				}
				key = k
			}
			name, ok := strings.CutPrefix(key, prefix)
			if !ok || name == "" || strings.Contains(name, "/") {
				continue
			}
			if strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
				s.logf("tensorfs: %s: skipped: its name holds a control character or is not UTF-8", s.URL(prefix+strconv.Quote(name)))
				continue
			}
			if len(out) >= maxList {
				return nil, false, &remote.Error{URL: s.URL(prefix), Kind: remote.Invalid, Msg: fmt.Sprintf("more than %d objects under the prefix", maxList)}
			}
			out = append(out, remote.Entry{Name: name, Size: aws.ToInt64(o.Size)})
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			return out, any, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// error turns an SDK error into a *remote.Error: the status, the S3
// error code and message, never the request's credentials.
func (s *Store) error(key string, err error) error {
	e := &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Err: err}
	var re *awshttp.ResponseError
	var send *smithyhttp.RequestSendError
	switch {
	case remote.NoSuchHost(err):
		// no answer, and none to come: the endpoint's name does not exist
	case errors.As(err, &send) || remote.NetworkError(err):
		e.Kind = remote.Transient // no answer: refused, reset, timed out
	case errors.As(err, &re) && re.HTTPStatusCode() != 0:
		e.Status = re.HTTPStatusCode()
		e.Kind = remote.StatusKind(e.Status)
	}
	var ae smithy.APIError
	if e.Status != 0 && errors.As(err, &ae) {
		e.Code = ae.ErrorCode()
		e.Msg = ae.ErrorMessage()
		if e.Msg == http.StatusText(e.Status) || e.Msg == e.Code {
			e.Msg = "" // a HEAD's answer: no body, no message
		}
		s.classify(e)
	}
	if e.Msg == "" {
		e.Msg = describe(err, e.Status)
	}
	if e.Kind == remote.Changed && e.Msg == "" {
		e.Msg = "the object changed (If-Match failed)"
	}
	return e
}

// classify sets e's kind (and for a missing bucket its URL) from its S3
// error code.
func (s *Store) classify(e *remote.Error) {
	switch e.Code {
	case "NoSuchBucket":
		e.URL = "s3://" + s.bucket
		e.Kind = remote.NotFound
	case "NoSuchKey", "NotFound":
		e.Kind = remote.NotFound
	case "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout":
		e.Kind = remote.Transient
	case "PreconditionFailed":
		e.Kind = remote.Changed
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken":
		e.Kind = remote.Denied
	}
}

// describe is the cause of an error without a useful S3 message: the
// innermost error of the operation (a refused connection, a timeout),
// or the status.
func describe(err error, status int) string {
	if status == http.StatusNotFound {
		return "not found"
	}
	if status == http.StatusForbidden {
		return "access denied (check the credentials)"
	}
	if status == http.StatusPreconditionFailed {
		return "the object changed (If-Match failed)"
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		if _, ok := u.(*awshttp.ResponseError); ok {
			break
		}
		err = u
	}
	return err.Error()
}

// Open is New as the S3 opener that source.RemoteOptions.S3 takes: a
// program passes it there to read s3:// SOURCEs (the Go client and
// package source do not link this package themselves).
// ro's Parallel sizes the connection pool (at least 64), its Proxy and
// Logf are Options'.
func Open(ctx context.Context, bucket string, noSign bool, ro remote.Options) (remote.Store, error) {
	st, err := New(ctx, bucket, Options{NoSign: noSign, Conns: max(64, ro.Parallel), Proxy: ro.Proxy, Logf: ro.Logf})
	if err != nil {
		return nil, err
	}
	return st, nil
}
