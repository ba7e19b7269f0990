package hftest

// The Xet bridge's answers and the xet-read-token route.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// xetToken answers xet-read-token: the CAS's URL and a token valid for
// URLTTL, in the headers utils/_xet.py reads (and a JSON body).
func (s *Server) xetToken(w http.ResponseWriter, r *http.Request) {
	s.XetTokens.Add(1)
	exp := s.now().Add(s.URLTTL).Unix()
	tok := "xet_hftest_" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(r.URL.Path))), 16)
	w.Header().Set("X-Xet-Cas-Url", s.CDN.URL)
	w.Header().Set("X-Xet-Access-Token", tok)
	w.Header().Set("X-Xet-Token-Expiration", strconv.FormatInt(exp, 10))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"casUrl": s.CDN.URL, "accessToken": tok, "exp": exp})
}

// bridge serves the file of Xet hash h: its signature and expiry
// checked, an unranged GET past BridgeUnrangedMax refused, a ranged one
// answered as FaultBridge says.
func (s *Server) bridge(w http.ResponseWriter, r *http.Request, h string, xml func(status int, code, msg string)) {
	s.BridgeRequests.Add(1)
	q := r.URL.Query()
	date, exp := q.Get("X-Amz-Date"), q.Get("X-Amz-Expires")
	d, derr := time.Parse("20060102T150405Z", date)
	n, nerr := strconv.Atoi(exp)
	expired := derr != nil || nerr != nil || s.now().After(d.Add(time.Duration(n)*time.Second))
	s.mu.Lock()
	sum := s.xet[h]
	s.mu.Unlock()
	b, ok := s.signedBlob(w, r, xml, q.Get("X-Amz-Signature"), date+"/"+exp, expired, sum)
	if !ok {
		return
	}
	cw := &countWriter{ResponseWriter: w, n: &s.CDNBytes}
	rng := r.Header.Get("Range")
	if rng == "" {
		s.BridgeUnranged.Add(1)
		if int64(len(b.data)) > s.BridgeUnrangedMax {
			xml(400, "InvalidRequest", "The file is too large to be downloaded without a Range")
			return
		}
	} else if f := s.takeFault(); f != 0 {
		first, last, ok := oneRange(rng, int64(len(b.data)))
		gz := f == BridgeGzipAlways || (f == BridgeGzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"))
		switch {
		case !ok:
		case f == BridgeWhole:
			s.BridgeFaulted.Add(1)
			cw.Header().Set("Content-Length", strconv.Itoa(len(b.data)))
			cw.WriteHeader(http.StatusOK)
			cw.Write(b.data)
			return
		case gz:
			s.BridgeFaulted.Add(1)
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b.data)
			zw.Close()
			cw.Header().Set("Content-Encoding", "gzip")
			cw.Header().Set("Content-Length", strconv.Itoa(z.Len()))
			cw.WriteHeader(http.StatusOK)
			cw.Write(z.Bytes())
			return
		case f == BridgeNoContentRange || f == BridgeShortNoContentRange:
			s.BridgeFaulted.Add(1)
			part := b.data[first : last+1]
			if f == BridgeShortNoContentRange {
				part = part[:len(part)/2]
			}
			cw.Header().Set("Content-Length", strconv.Itoa(len(part)))
			cw.WriteHeader(http.StatusPartialContent)
			cw.Write(part)
			return
		}
	}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b.data))
}

// oneRange parses a Range header of one satisfiable range bytes=A-B or
// bytes=A- of a file of size bytes.
func oneRange(h string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !found || !dash || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last, true
}
