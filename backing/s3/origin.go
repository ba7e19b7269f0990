package s3

import (
	"net/url"
	"strconv"
)

// Origin names the endpoint and the bucket, for the disk cache's key:
// two endpoints serving a bucket of the same name are two origins. With
// no endpoint configured it is AWS's, implied by the region (buckets are
// one namespace per partition, which the region names).
func (s *Store) Origin() string {
	o := s.client.Options()
	ep := "aws region " + o.Region
	if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
		ep = *o.BaseEndpoint
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			ep = endpointOrigin(u)
		}
	}
	return "s3 " + strconv.Quote(ep) + " path-style=" + strconv.FormatBool(o.UsePathStyle) + " bucket " + strconv.Quote(s.bucket)
}

// endpointOrigin is scheme://host:port/path of u, the port always said,
// the host lower case, without user info or query.
func endpointOrigin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + lowerHost(u.Hostname()) + ":" + port + u.EscapedPath()
}

func lowerHost(h string) string {
	b := []byte(h)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
