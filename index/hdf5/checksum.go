package hdf5

import (
	"encoding/binary"
	"math/bits"
)

// lookup3 is Bob Jenkins's hashlittle (lookup3.c) with initial value 0:
// the checksum of HDF5's version-2 structures (H5_checksum_lookup3).
func lookup3(k []byte) uint32 {
	a := 0xdeadbeef + uint32(len(k))
	b, c := a, a
	for len(k) > 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		k = k[12:]
	}
	if len(k) == 0 {
		return c
	}
	var t [12]byte
	copy(t[:], k)
	a += binary.LittleEndian.Uint32(t[:])
	b += binary.LittleEndian.Uint32(t[4:])
	c += binary.LittleEndian.Uint32(t[8:])
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}

// checksum verifies that the 4 bytes after b[:n] are the lookup3 of
// b[:n]: the checksum of the structure what at file offset off.
func (r *reader) checksum(b []byte, n int, off int64, what string) error {
	if n < 0 || n+4 > len(b) {
		return r.errorf(off, "%s is cut off before its checksum", what)
	}
	if got, want := lookup3(b[:n]), binary.LittleEndian.Uint32(b[n:]); got != want {
		return r.errorf(off, "%s: checksum %08x, computed %08x (a damaged file)", what, want, got)
	}
	return nil
}
