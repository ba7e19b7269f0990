package pickle

// Where the machine found the bytes of str and bytes values, and the
// scan that tells whether a str is Latin-1 (so that its bytes can be
// served from the stream as an array's data).

// Span is where the bytes of a str or bytes value lie in the stream:
// [Off, Off+N). Raw says they are the value's bytes as Python holds them
// (bytes, a Python 2 str, or a str of Latin-1 bytes as _codecs.encode
// writes them, when all are ASCII so that its UTF-8 is the same bytes);
// a str with other characters is UTF-8 in the stream, not its bytes.
// For such a str, Latin1 is its length in code points when every one is
// below 256, so that _codecs.encode(s, "latin1") (or numpy's
// ndarray.__setstate__ given a str) makes that many bytes, one per code
// point; when one is not (or the UTF-8 is invalid, or ends mid-character)
// Latin1 is -1 and BadAt is the stream offset of its first byte, where
// Python's unpickler fails too.
type Span struct {
	Off, N int64
	Raw    bool
	Latin1 int64
	BadAt  int64
}

// SpanOf returns where the bytes of v (a Bytes or str the machine read,
// or the bytes of one the Env converted, as _codecs.encode) lie in the
// stream. Empty values have none.
func (m *Machine) SpanOf(v any) (Span, bool) {
	var sp Span
	var ok bool
	switch x := v.(type) {
	case Bytes:
		if len(x) > 0 {
			sp, ok = m.byteSpans[&x[0]]
		}
	case string:
		if x != "" {
			sp, ok = m.strSpans[x]
		}
	case Large:
		return Span{Off: x.Off, N: int64(x.N), Raw: x.Raw, Latin1: x.Latin1, BadAt: x.BadAt}, x.Off >= 0
	}
	return sp, ok
}

// SetSpan records that Bytes b are the bytes at sp (an Env converting a
// str to bytes it read, _codecs.encode).
func (m *Machine) SetSpan(b Bytes, sp Span) {
	if len(b) > 0 {
		m.byteSpans[&b[0]] = sp
	}
}

func (m *Machine) setStrSpan(s string, sp Span) {
	if s == "" {
		return
	}
	if old, ok := m.strSpans[s]; ok && (old.Raw || !sp.Raw) {
		return // equal values: any span of them serves
	}
	m.strSpans[s] = sp
}

// Latin1Scan reads UTF-8 (written to it in pieces) as the code points of
// a str and says whether they are all below 256: what a Latin-1 str
// (_codecs.encode(s, "latin1"), pickle protocol 2's way of writing bytes)
// is in a pickle. Such a code point is one byte (< 0x80) or two (a lead
// byte 0xC2 or 0xC3, then a continuation byte 0x80..0xBF).
type Latin1Scan struct {
	N      int64 // bytes written
	Chars  int64 // code points so far
	High   bool  // a byte >= 0x80 was seen
	BadAt  int64 // offset (among the bytes written) of the first byte not Latin-1 as UTF-8; valid when Bad
	Bad    bool
	inChar bool // a lead byte awaits its continuation
}

func (w *Latin1Scan) Write(p []byte) (int, error) {
	for i, c := range p {
		if w.Bad {
			break
		}
		switch {
		case w.inChar:
			if c < 0x80 || c > 0xBF {
				w.Bad, w.BadAt = true, w.N+int64(i)-1
			}
			w.inChar = false
		case c < 0x80:
			w.Chars++
		case c == 0xC2 || c == 0xC3:
			w.High, w.inChar = true, true
			w.Chars++
		default:
			w.High, w.Bad, w.BadAt = true, true, w.N+int64(i)
		}
	}
	w.N += int64(len(p))
	return len(p), nil
}

// Done reports, once every byte is written, the number of code points,
// or -1 and the offset of the first byte that is not Latin-1 (a
// character cut off at the end included).
func (w *Latin1Scan) Done() (chars, badAt int64) {
	switch {
	case w.Bad:
		return -1, w.BadAt
	case w.inChar:
		return -1, w.N - 1
	}
	return w.Chars, -1
}

// ascii reports whether b is all ASCII.
func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
