package backing

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/lazyweights/tensorfs/zstdpool"
)

// Member codecs: how a member's bytes are stored in the file that holds
// it, one type per codec. Each one checks its fields, names a member in
// messages, and decodes a member: reads the file, writes exactly the
// member's bytes and checks them. What all have in common (the budgets of
// memory and disk, reservations, the cache file, spills) is the
// InflateCache's (inflate_member.go); a new codec is a new type here.

// Codec is how a member's bytes are stored: Deflated, Zstd, Latin1,
// Decoded or Stream.
type Codec interface {
	// check says what is wrong with the codec's fields (a negative
	// offset or length), or "".
	check() string
	// what names a member called name in messages.
	what(name string) string
	// decode writes the member's d.size bytes to d.w (or d.at), checked;
	// a failure says why, and whether the data is bad.
	decode(d *decoding) *failure
}

var (
	_ Codec = Deflated{}
	_ Codec = Zstd{}
	_ Codec = Latin1{}
	_ Codec = Decoded{}
)

// negativeSize is what a member whose offset or size is negative is
// refused with.
const negativeSize = "negative offset or size"

// Deflated: a deflated member of a zip file (an .npz written by
// numpy.savez_compressed), as the zip's central directory gives it. It
// inflates to exactly the member's Size bytes, with this CRC-32.
type Deflated struct {
	Offset         int64 // first byte of the compressed data in the file
	CompressedSize int64
	CRC32          uint32
}

func (k Deflated) check() string {
	if k.Offset < 0 || k.CompressedSize < 0 {
		return negativeSize
	}
	return ""
}

func (Deflated) what(name string) string { return "member " + name }

func (k Deflated) decode(d *decoding) *failure {
	fr := flate.NewReader(bufio.NewReaderSize(d.compressed(k.Offset, k.CompressedSize), 1<<20))
	defer fr.Close()
	n, sum, err := d.copy(fr)
	var extra [1]byte
	if err == nil && n == d.size {
		// Nothing may follow the declared size.
		var more int
		if more, err = fr.Read(extra[:]); more > 0 {
			return fail(true, nil, "inflates to more than the %d bytes the zip directory declares", d.size)
		}
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		if f := d.ioFailure(err, k.Offset, k.CompressedSize); f != nil {
			return f
		}
		var ce flate.CorruptInputError
		if errors.As(err, &ce) {
			return fail(true, nil, "the deflate data is corrupt at byte %d of it (the compressed data starts at byte %d of the file)", int64(ce), k.Offset)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(true, nil, "the deflate data ends early, after %d of the %d bytes the zip directory declares", n, d.size)
		}
		return fail(true, err, "cannot inflate it")
	}
	if n != d.size {
		return fail(true, nil, "inflates to %d bytes, not the %d the zip directory declares", n, d.size)
	}
	return d.verify(sum, k.CRC32, "inflated")
}

// Zstd: the CompressedSize bytes at Offset are a zstd stream; the member
// is Size of its decoded bytes after the first Skip (a torch.save zip's
// storage record inside a distributed checkpoint's zstd item), with this
// CRC-32. The stream is decoded as zstdpool's policy says.
type Zstd struct {
	Offset         int64 // first byte of the stream in the file
	CompressedSize int64
	CRC32          uint32
	Skip           int64
}

func (k Zstd) check() string {
	if k.Offset < 0 || k.CompressedSize < 0 || k.Skip < 0 {
		return negativeSize
	}
	return ""
}

func (Zstd) what(name string) string { return "member " + name }

func (k Zstd) decode(d *decoding) *failure {
	zd, err := zstdpool.NewReader(bufio.NewReaderSize(d.compressed(k.Offset, k.CompressedSize), 1<<20))
	if err != nil {
		return fail(false, err, "cannot start a zstd decoder")
	}
	defer zd.Close()
	if n, err := io.CopyN(io.Discard, zd, k.Skip); err != nil {
		if f := d.ioFailure(err, k.Offset, k.CompressedSize); f != nil {
			return f
		}
		return fail(true, nil, "the zstd stream (%d bytes at byte %d) decodes to %d bytes, short of the %d before the member: %v", k.CompressedSize, k.Offset, n, k.Skip+d.size, zstdpool.Cause(err))
	}
	// A zstd member is followed by the rest of its zip: no check that
	// nothing follows.
	n, sum, err := d.copy(zd)
	if err != nil {
		if f := d.ioFailure(err, k.Offset, k.CompressedSize); f != nil {
			return f
		}
		return fail(true, nil, "the zstd stream (%d bytes at byte %d) is corrupt or ends early, after %d of the member's %d bytes: %v", k.CompressedSize, k.Offset, n, d.size, zstdpool.Cause(err))
	}
	if n != d.size {
		return fail(true, nil, "the zstd stream (%d bytes at byte %d) ends after %d of the member's %d bytes", k.CompressedSize, k.Offset, n, d.size)
	}
	return d.verify(sum, k.CRC32, "decoded")
}

// Latin1: the Len bytes at Offset are UTF-8 of code points below 256
// (pickle protocol 2's _codecs.encode(str, "latin1")), each one byte of
// the member; they must decode to exactly Size bytes. No CRC-32: the
// encoding itself is checked, byte by byte. The member's Name is a
// tensor's.
type Latin1 struct {
	Offset int64 // first byte of the str's UTF-8 in the file
	Len    int64 // bytes of UTF-8
}

func (k Latin1) check() string {
	if k.Offset < 0 || k.Len < 0 {
		return negativeSize
	}
	return ""
}

func (Latin1) what(name string) string { return "tensor " + strconv.Quote(name) }

func (k Latin1) decode(d *decoding) *failure {
	if err := latin1Decode(d.w, d.compressed(k.Offset, k.Len), k, d.size); err != nil {
		var re *readError
		var we *writeError
		switch {
		case errors.As(err, &re):
			return fail(false, re.err, "cannot read its Latin-1 str (%d bytes at byte %d)", k.Len, k.Offset)
		case errors.As(err, &we):
			return fail(false, we.err, "cannot write the decoded bytes to their cache file in %s", d.c.opts.Dir)
		}
		return fail(true, nil, "%v", err)
	}
	if err := d.flush(); err != nil {
		return fail(false, err, "cannot write the decoded bytes to their cache file in %s", d.c.opts.Dir)
	}
	return nil
}

// latin1Decode writes to w the bytes of the Latin-1 str whose UTF-8 src
// gives (k.Len bytes at k.Offset of the file): each code point below 256
// is one byte. It refuses any other code point, invalid UTF-8, a
// character cut off, and a decoded length other than size, saying at
// which byte of the file. Errors of src and w come back as they are
// (readError, writeError).
func latin1Decode(w io.Writer, src io.Reader, k Latin1, size int64) error {
	in := make([]byte, 1<<20)
	out := make([]byte, 0, len(in))
	var n, pos int64 // bytes decoded, bytes read
	lead := -1       // the lead byte waiting for its continuation, or -1
	for {
		r, err := src.Read(in)
		out = out[:0]
		for i, c := range in[:r] {
			switch {
			case lead >= 0:
				if c < 0x80 || c > 0xBF {
					return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) has invalid UTF-8 at byte %d", k.Len, k.Offset, k.Offset+pos+int64(i)-1)
				}
				out = append(out, byte(lead&3)<<6|c&0x3F)
				lead = -1
			case c < 0x80:
				out = append(out, c)
			case c == 0xC2 || c == 0xC3:
				lead = int(c)
			default:
				return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) has %s at byte %d", k.Len, k.Offset, latin1Bad(c), k.Offset+pos+int64(i))
			}
		}
		pos += int64(r)
		if n+int64(len(out)) > size {
			return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) decodes to more than the array's %d bytes", k.Len, k.Offset, size)
		}
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				return werr
			}
			n += int64(len(out))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	switch {
	case pos < k.Len:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) ends early, after %d bytes (the file is shorter)", k.Len, k.Offset, pos)
	case lead >= 0:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) ends inside a character at byte %d", k.Len, k.Offset, k.Offset+pos-1)
	case n != size:
		return fmt.Errorf("its Latin-1 str (UTF-8, %d bytes at byte %d) decodes to %d bytes, not the array's %d", k.Len, k.Offset, n, size)
	}
	return nil
}

// latin1Bad says what byte c is where a Latin-1 character may start.
func latin1Bad(c byte) string {
	switch {
	case c >= 0xC4 && c <= 0xF4:
		return fmt.Sprintf("a code point above U+00FF, which is not Latin-1 (lead byte 0x%02X)", c)
	case c >= 0x80 && c <= 0xBF:
		return fmt.Sprintf("a stray continuation byte 0x%02X (invalid UTF-8)", c)
	}
	return fmt.Sprintf("byte 0x%02X (invalid UTF-8)", c)
}

// Decoded: Decode writes the member's bytes (exactly Size of them) to
// w, reading file as its format stores them (index.Decoded: an HDF5
// dataset's gzip chunks); w is an index.DecodeTarget (decodeWriter). Its
// error is one line on the member's data. The member's Name is a
// tensor's.
type Decoded struct {
	Decode func(w io.Writer, file io.ReaderAt) error
}

func (k Decoded) check() string {
	if k.Decode == nil {
		return "internal error: a decoded member without its decoder"
	}
	return ""
}

func (Decoded) what(name string) string { return "tensor " + strconv.Quote(name) }

func (k Decoded) decode(d *decoding) *failure {
	dw := &decodeWriter{w: d.w, at: d.at, c: d.c, size: d.size, left: d.size}
	err := k.Decode(dw, d.file)
	dw.releaseScratch()
	if err == nil && dw.left != 0 {
		err = fmt.Errorf("decodes to %d bytes, not %d", d.size-dw.left, d.size)
	}
	if err == nil {
		if err := d.flush(); err != nil {
			return fail(false, err, "cannot write the decoded bytes to their cache file in %s", d.c.opts.Dir)
		}
		return nil
	}
	var we *writeError
	if errors.As(err, &we) {
		return fail(false, we.err, "cannot write the decoded bytes to their cache file in %s", d.c.opts.Dir)
	}
	return fail(true, nil, "%v", err)
}

// decoding is one member being decoded: the file it is read from, its
// size, and where its bytes go: w, or at at their offsets (the same
// bytes; w is buffered when it writes to a cache file).
type decoding struct {
	c    *InflateCache
	file MemberFile
	size int64
	w    io.Writer
	at   io.WriterAt
}

// compressed reads the n bytes at off of the file, its errors marked
// (readError).
func (d *decoding) compressed(off, n int64) io.Reader {
	return &fileReader{r: io.NewSectionReader(d.file, off, n)}
}

// copy writes the member's bytes from r to w, at most size of them, and
// returns how many and their CRC-32.
func (d *decoding) copy(r io.Reader) (int64, uint32, error) {
	h := crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(d.w, h), io.LimitReader(r, d.size))
	return n, h.Sum32(), err
}

// flush writes out what w holds.
func (d *decoding) flush() error {
	if bw, ok := d.w.(*bufio.Writer); ok {
		return bw.Flush()
	}
	return nil
}

// verify writes out what w holds and checks that sum, the CRC-32 of the
// member's (inflated or decoded) bytes, is want, the zip directory's.
func (d *decoding) verify(sum, want uint32, bytes string) *failure {
	if err := d.flush(); err != nil {
		return fail(false, err, "cannot write the inflated member to its cache file in %s", d.c.opts.Dir)
	}
	if sum != want {
		return fail(true, nil, "CRC-32 of the %s bytes is %08x, the zip directory says %08x", bytes, sum, want)
	}
	return nil
}

// ioFailure is err's failure when it is an error of reading the file's
// compressed data (n bytes at off) or of writing the cache file, which
// the next read may not meet again; nil for any other error.
func (d *decoding) ioFailure(err error, off, n int64) *failure {
	var re *readError
	if errors.As(err, &re) {
		return fail(false, re.err, "cannot read its compressed data (%d bytes at byte %d)", n, off)
	}
	var we *writeError
	if errors.As(err, &we) {
		return fail(false, we.err, "cannot write the inflated member to its cache file in %s", d.c.opts.Dir)
	}
	return nil
}

// failure is why a member cannot be decoded: msg, its cause err (if
// any), and whether the member's data is bad (bad: every read fails
// with it) rather than the file unread or the cache file unwritten now.
type failure struct {
	bad bool
	err error
	msg string
}

func fail(bad bool, cause error, format string, args ...any) *failure {
	return &failure{bad: bad, err: cause, msg: fmt.Sprintf(format, args...)}
}

// Stream: the CompressedSize bytes at Offset are one whole gzip stream
// (its members end to end, as compress/gzip reads them, each checked by
// its CRC-32 and length) or zstd stream (as zstdpool's policy says): an
// OCI artifact's .tar+gzip or .tar+zstd layer. The member is all of its
// decoded bytes, exactly Size of them, nothing after. When SHA256 is
// set the compressed bytes are read to their end and hashed as they are
// read: another sum is bad data. Its Name is the layer's digest.
type Stream struct {
	Offset         int64 // first byte of the stream in the file
	CompressedSize int64
	Zstd           bool   // else gzip
	SHA256         string // hex sha256 of the compressed bytes, or ""
}

var _ Codec = Stream{}

func (k Stream) check() string {
	if k.Offset < 0 || k.CompressedSize < 0 {
		return negativeSize
	}
	return ""
}

func (Stream) what(name string) string { return "layer " + name }

// kind is "gzip" or "zstd".
func (k Stream) kind() string {
	if k.Zstd {
		return "zstd"
	}
	return "gzip"
}

func (k Stream) decode(d *decoding) *failure {
	r, err := k.open(d.file)
	if err == nil {
		defer r.Close()
		var n int64
		n, _, err = d.copy(r)
		if err == nil && n == d.size {
			// Nothing may follow; reading on to the end checks the sum.
			var extra [1]byte
			if more, e := io.ReadFull(r, extra[:]); more > 0 {
				return fail(true, nil, "the %s stream decodes to more than the %d bytes it decoded to before", k.kind(), d.size)
			} else if e != io.EOF {
				err = e
			}
		} else if err == nil {
			return fail(true, nil, "the %s stream decodes to %d bytes, not the %d it decoded to before", k.kind(), n, d.size)
		}
	}
	if err != nil {
		if f := d.ioFailure(err, k.Offset, k.CompressedSize); f != nil {
			return f
		}
		var se *streamError
		if errors.As(err, &se) {
			return fail(true, nil, "%s", se.msg)
		}
		return fail(true, err, "cannot decode its %s stream", k.kind())
	}
	if err := d.flush(); err != nil {
		return fail(false, err, "cannot write the decoded bytes to their cache file in %s", d.c.opts.Dir)
	}
	return nil
}

// open starts decoding the stream in file; file's errors are marked
// (readError).
func (k Stream) open(file io.ReaderAt) (*streamReader, error) {
	r := &streamReader{k: k, raw: &hashReader{r: &fileReader{r: io.NewSectionReader(file, k.Offset, k.CompressedSize)}}}
	if k.SHA256 != "" {
		r.raw.h = sha256.New()
	}
	in := bufio.NewReaderSize(r.raw, 1<<20)
	if k.Zstd {
		zd, err := zstdpool.NewReader(in)
		if err != nil {
			return nil, fmt.Errorf("cannot start a zstd decoder: %v", err)
		}
		r.dec, r.close = zd, func() { zd.Close() }
		return r, nil
	}
	gz, err := gzip.NewReader(in)
	if err != nil {
		return nil, r.corrupt(err)
	}
	r.dec, r.close = gz, func() { gz.Close() }
	return r, nil
}

// streamReader decodes a Stream, counting what it decoded (out) and
// what it read (raw).
type streamReader struct {
	k     Stream
	raw   *hashReader
	dec   io.Reader
	close func()
	out   int64
	err   error // sticky
}

// streamError is a Stream's bad data, said in one phrase.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

func (r *streamReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.dec.Read(p)
	r.out += int64(n)
	switch {
	case err == io.EOF:
		if e := r.end(); e != nil {
			err = e
		}
	case err != nil:
		err = r.corrupt(err)
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

func (r *streamReader) Close() error {
	if r.close != nil {
		r.close()
		r.close = nil
	}
	return nil
}

// end reads what is left of the compressed bytes and checks their
// count and sum.
func (r *streamReader) end() error {
	if _, err := io.Copy(io.Discard, r.raw); err != nil {
		return err
	}
	if r.raw.n != r.k.CompressedSize {
		return &streamError{fmt.Sprintf("the %s stream ends early: the file holds %d of its %d compressed bytes", r.k.kind(), r.raw.n, r.k.CompressedSize)}
	}
	if r.raw.h != nil {
		if got := hex.EncodeToString(r.raw.h.Sum(nil)); got != r.k.SHA256 {
			return &streamError{fmt.Sprintf("the sha256 of its %d compressed bytes is %s, not its digest sha256:%s", r.raw.n, got, r.k.SHA256)}
		}
	}
	return nil
}

// corrupt is the error of a decoder's err: file's (marked) as it is,
// else bad data.
func (r *streamReader) corrupt(err error) error {
	var re *readError
	if errors.As(err, &re) {
		return err
	}
	kind := r.k.kind()
	if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		return &streamError{fmt.Sprintf("the %s stream ends early, after %d decoded bytes (%d of its %d compressed bytes read)", kind, r.out, r.raw.n, r.k.CompressedSize)}
	}
	cause := err.Error()
	if r.k.Zstd {
		cause = zstdpool.Cause(err)
	}
	return &streamError{fmt.Sprintf("the %s stream is corrupt after %d decoded bytes (%d of its %d compressed bytes read): %s", kind, r.out, r.raw.n, r.k.CompressedSize, cause)}
}

// hashReader counts what it reads, and hashes it when h is set.
type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	if h.h != nil {
		h.h.Write(p[:n])
	}
	return n, err
}

// unmark is err with file's error as file gave it (not readError).
func unmark(err error) error {
	var re *readError
	if errors.As(err, &re) {
		return re.err
	}
	return err
}
