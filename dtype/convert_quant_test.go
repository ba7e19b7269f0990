package dtype

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// fakeDequant stands in for a ggml dequantizer on blocks of Q8_0's shape
// (32 elements in 34 bytes): element j of a block is the float32 with bits
// (first four bytes of the block) + j*(bytes 4..7), so random blocks give
// NaNs, infinities, subnormals and rounding ties alike.
func fakeDequant(dst []float32, src []byte) {
	for k := 0; k+34 <= len(src); k += 34 {
		base := binary.LittleEndian.Uint32(src[k:])
		step := binary.LittleEndian.Uint32(src[k+4:])
		for j := range 32 {
			dst[k/34*32+j] = math.Float32frombits(base + uint32(j)*step)
		}
	}
}

// TestQuantKernel: a quantized source converts through its dequantizer and
// the float32 kernels, in bounded chunks, equal to dequantizing everything
// and converting the float32 values.
func TestQuantKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, nblocks := range []int{0, 1, 127, 128, 129, 300} {
		src := make([]byte, 34*nblocks)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		f := make([]float32, 32*nblocks)
		fakeDequant(f, src)
		f32 := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(v))
		}
		for _, accel := range accelModes() {
			setAccel(t, accel)
			for _, to := range targets {
				k := wrap(Q8_0, to, quantKernel(Q8_0, to, fakeDequant))
				got := make([]byte, len(f)*int(to.ElemSize()))
				k(got, src)
				want := f32
				if to != F32 {
					want = mustConvert(t, F32, to, f32)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d blocks -> %s (%s): differs from dequantize-then-convert", nblocks, to, pathName(accel))
				}
			}
		}
	}
}

// TestQuantDequantizers: for every quantized dtype that has a dequantizer,
// the converters agree with it: F32 is its output, the others are its
// output converted from F32.
func TestQuantDequantizers(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, from := range All() {
		deq, ok := quantDequantizer(from)
		if from.Kind() != KindQuant || !ok {
			continue
		}
		fi := from.Info()
		nblocks := 40
		src := make([]byte, int(fi.BlockBytes)*nblocks)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		f := make([]float32, int(fi.BlockElems)*nblocks)
		deq(f, src)
		f32 := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(v))
		}
		for _, to := range targets {
			t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) {
				got := mustConvert(t, from, to, src)
				want := f32
				if to != F32 {
					want = mustConvert(t, F32, to, f32)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s -> %s differs from dequantize-then-convert", from, to)
				}
			})
		}
	}
}

// TestConcurrent runs converters from several goroutines at once (the
// quant scratch comes from a pool; run with -race).
func TestConcurrent(t *testing.T) {
	src := make([]byte, 34*200)
	rng := rand.New(rand.NewPCG(17, 18))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	conv := wrap(Q8_0, F16, quantKernel(Q8_0, F16, fakeDequant))
	want := make([]byte, 2*32*200)
	conv(want, src)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]byte, len(want))
			for range 20 {
				clear(got)
				conv(got, src)
				if !bytes.Equal(got, want) {
					errs <- fmt.Sprintf("goroutine %d: different bytes", g)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
