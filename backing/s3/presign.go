package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// Behind a proxy (Options.Proxy, a cache tier) an object's GETs are
// presigned: the SigV4 signature goes in the query string, computed
// without Range or If-Match, which are sent as plain headers. The path
// is the same for every node and every range, so that a tier keying on
// it without the query (nginx's slice cache, Dragonfly with the
// signature parameters filtered from its task key) holds one copy of
// each piece for the whole fleet; no Authorization header or security
// token goes to the proxy (the query holds the access key id and the
// signature, never the secret key). Listing and HEAD go to the endpoint
// directly: they are small, and a cached listing would be wrong.

// presignExpiry is how long a presigned GET is valid: it is sent at once.
const presignExpiry = 15 * time.Minute

// presigned sends a GET of key presigned (Range, If-Match and
// If-Unmodified-Since unsigned) through the tier.
func (s *Store) presigned(ctx context.Context, key, version, rng string, pin func(h http.Header)) (*http.Response, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	ps, err := s.presign.PresignGetObject(ctx, in, s3.WithPresignExpires(presignExpiry))
	if err != nil {
		return nil, s.error(key, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ps.URL, nil)
	if err != nil {
		return nil, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: "presigned URL: " + tierError(err)}
	}
	for k, vs := range ps.SignedHeader {
		if strings.EqualFold(k, "Host") {
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Range", rng)
	req.Header.Set("Accept-Encoding", "identity")
	if pin != nil {
		pin(req.Header)
	}
	resp, err := s.tier.Do(req)
	if err != nil {
		return nil, &remote.Error{URL: s.URL(key), Kind: remote.ConnKind(err), Msg: tierError(err), Err: err}
	}
	return resp, nil
}

// tierError is err without its URL (a presigned query).
func tierError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// presignedError is the error of a presigned GET's answer that is not
// 206 (or 200): its status and S3 error code.
func (s *Store) presignedError(key string, resp *http.Response) error {
	var body struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	xml.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&body)
	e := &remote.Error{URL: s.URL(key), Kind: remote.StatusKind(resp.StatusCode), Status: resp.StatusCode, Code: body.Code, Msg: body.Message}
	if len(e.Code) > 64 {
		e.Code = e.Code[:64]
	}
	if len(e.Msg) > 200 {
		e.Msg = e.Msg[:200]
	}
	s.classify(e)
	if e.Msg == "" {
		e.Msg = describe(errors.New(http.StatusText(resp.StatusCode)), resp.StatusCode)
	}
	if e.Kind == remote.Changed {
		e.Msg = "the object changed (If-Match failed)"
	}
	return e
}

// openPresigned is Open's GET of the object's first bytes, presigned.
func (s *Store) openPresigned(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	resp, err := s.presigned(ctx, key, "", fmt.Sprintf("bytes=0-%d", len(head)-1), nil)
	if err != nil {
		return remote.Object{}, 0, err
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusOK:
	case http.StatusRequestedRangeNotSatisfiable:
		return s.Open(ctx, key, nil) // an empty object
	default:
		return remote.Object{}, 0, s.presignedError(key, resp)
	}
	obj := remote.Object{Key: key, ETag: resp.Header.Get("ETag"), Version: resp.Header.Get("X-Amz-Version-Id")}
	if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		obj.LastModified = lm
	}
	cr := resp.Header.Get("Content-Range")
	if resp.StatusCode == http.StatusPartialContent && cr == "" {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: "the server answered a ranged GET with HTTP 206 and no Content-Range"}
	}
	return s.readHead(obj, head, cr, resp.ContentLength, resp.Body)
}

// getPresigned is Get, presigned: pinned by If-Match (unsigned) and the
// version id (signed, in the query), and every reply's ETag and
// Content-Range checked, so that a tier's cached piece of another
// version is refused (Changed), never served.
func (s *Store) getPresigned(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	rng := fmt.Sprintf("bytes=%d-%d", off, off+want-1)
	resp, err := s.presigned(ctx, obj.Key, obj.Version, rng, func(h http.Header) {
		switch {
		case obj.ETag != "":
			h.Set("If-Match", obj.ETag)
		case !obj.LastModified.IsZero():
			h.Set("If-Unmodified-Since", obj.LastModified.UTC().Format(http.TimeFormat))
		}
	})
	if err != nil {
		return err
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusOK:
	case http.StatusPreconditionFailed:
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Changed, Status: 412, Msg: "the object changed (If-Match failed)"}
	default:
		return s.presignedError(obj.Key, resp)
	}
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	e := resp.Header.Get("ETag")
	switch {
	case obj.ETag != "" && e == "":
		return changed("the reply has no ETag (the object had ETag %s when opened), so its bytes cannot be shown to be of that version", obj.ETag)
	case obj.ETag != "" && e != obj.ETag:
		return changed("ETag %s, was %s", e, obj.ETag)
	}
	if v := resp.Header.Get("X-Amz-Version-Id"); obj.Version != "" && v != "" && v != obj.Version {
		return changed("version %s, was %s", v, obj.Version)
	}
	if cr := resp.Header.Get("Content-Range"); cr != "" || off != 0 || want != obj.Size {
		if err := remote.CheckContentRange(s.URL(obj.Key), cr, off, want, obj.Size); err != nil {
			return err
		}
	}
	if resp.ContentLength != want {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, resp.ContentLength)}
	}
	if err := remote.ReadBufs(resp.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
}

// drain reads a little of what is left of the body, so that the
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
