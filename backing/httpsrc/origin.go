package httpsrc

import (
	"net/url"
	"sort"
	"strings"
)

// Origin is the server (scheme, lower-case host, port, always said) and
// the URL's query, for the disk cache's key: the path is the object's
// key, said apart. The query can select other bytes (a revision, a
// version id) and is kept, but for the parameters of a presigned URL's
// signature, which name no bytes and change with every signing; user
// info never selects bytes and is left out. Origin is only ever hashed,
// under the cache's secret key, never written or said.
func (s *Store) Origin() string {
	port := s.base.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[s.base.Scheme]
	}
	return s.base.Scheme + "://" + strings.ToLower(s.base.Hostname()) + ":" + port + "?" + cacheQuery(s.query)
}

// signing are the query parameters (lower case) of presigned URLs (AWS
// SigV4 and V2, Google Cloud Storage) that authenticate a request without
// choosing what it returns. Others (Azure's short SAS names among them)
// are kept: a URL signed again is then another origin, a cold cache but
// never wrong bytes.
var signing = map[string]bool{
	"x-amz-algorithm": true, "x-amz-credential": true, "x-amz-date": true, "x-amz-expires": true,
	"x-amz-signedheaders": true, "x-amz-signature": true, "x-amz-security-token": true,
	"awsaccesskeyid": true, "signature": true, "expires": true,
	"x-goog-algorithm": true, "x-goog-credential": true, "x-goog-date": true, "x-goog-expires": true,
	"x-goog-signedheaders": true, "x-goog-signature": true, "googleaccessid": true,
}

// cacheQuery is raw without its signing parameters, in a canonical order.
func cacheQuery(raw string) string {
	var keep []string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if signing[strings.ToLower(k)] {
			continue
		}
		keep = append(keep, kv)
	}
	sort.Strings(keep)
	return strings.Join(keep, "&")
}
