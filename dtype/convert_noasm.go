//go:build !amd64 || purego

package dtype

// No assembly kernels on this build: the pure-Go loops do all the work.

const hasAccel = false

var useAccel = false

func accelBF16ToF32(dst, src []byte) int { return 0 }
func accelF16ToF32(dst, src []byte) int  { return 0 }
func accelF32ToF16(dst, src []byte) int  { return 0 }
func accelF32ToBF16(dst, src []byte) int { return 0 }
func accelF16ToBF16(dst, src []byte) int { return 0 }
func accelBF16ToF16(dst, src []byte) int { return 0 }
