package cuda

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
)

// IPCIndexPath is where a --gpu mount serves its IPC document, relative
// to the mount point (SPEC: GPUs).
const IPCIndexPath = ".cuda/index.json"

// IPCIndex is the document of a checkpoint kept in device memory for
// other processes: M/.cuda/index.json of `tensorfs mount --gpu N`. A
// consumer opens each allocation's handle with cudaIpcOpenMemHandle and
// finds each tensor at its offset (a multiple of DeviceAlign) in it.
type IPCIndex struct {
	Device      int             `json:"device"`
	UUID        string          `json:"uuid"`
	Allocations []IPCAllocation `json:"allocations"`
	Tensors     []IPCTensor     `json:"tensors"`
}

// IPCAllocation is one device allocation: the hex of its 64-byte
// cudaIpcMemHandle_t and its size.
type IPCAllocation struct {
	Handle string `json:"handle"`
	Size   int64  `json:"size"`
}

// IPCTensor is one tensor in an allocation.
type IPCTensor struct {
	Name       string  `json:"name"`
	Path       string  `json:"path"`
	DType      string  `json:"dtype"`
	Shape      []int64 `json:"shape"`
	Allocation int     `json:"allocation"`
	Offset     int64   `json:"offset"`
	Size       int64   `json:"size"`
}

// IPCIndex describes the upload for other processes: its allocation's
// IPC handle, the device's UUID, and every tensor at its offset. path
// gives each tensor's path in the mount (by index in u.Tensors).
func (u *Upload) IPCIndex(path func(i int) string) (*IPCIndex, error) {
	h, err := u.rt.IPCHandle(u.dev, u.Base)
	if err != nil {
		return nil, err
	}
	_, uuid, err := u.rt.DeviceUUID(u.dev)
	if err != nil {
		return nil, err
	}
	doc := &IPCIndex{
		Device:      u.dev,
		UUID:        uuid,
		Allocations: []IPCAllocation{{Handle: hex.EncodeToString(h[:]), Size: u.Bytes}},
		Tensors:     make([]IPCTensor, len(u.Tensors)),
	}
	for i, t := range u.Tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		doc.Tensors[i] = IPCTensor{Name: t.Name, Path: path(i), DType: t.DType.String(), Shape: shape, Offset: t.Offset, Size: t.Size}
	}
	return doc, nil
}

// Shared is a checkpoint in another process's device memory, opened
// through its IPC document: Tensors point into the mapped allocations,
// no byte copied. Close unmaps them.
type Shared struct {
	rt      *Runtime
	Device  int // the local ordinal of the device
	Tensors []Tensor
	bases   []DevicePtr
}

// OpenMount opens the tensors of a `tensorfs mount --gpu` at dir: it
// reads dir/.cuda/index.json, finds the device by its UUID among this
// process's devices, and opens every allocation's IPC handle.
func OpenMount(rt *Runtime, dir string) (*Shared, error) {
	p := filepath.Join(dir, IPCIndexPath)
	data, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no %s: not a tensorfs mount made with --gpu", dir, IPCIndexPath)
		}
		return nil, err
	}
	var doc IPCIndex
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return OpenIPC(rt, &doc, p)
}

// OpenIPC opens the allocations of doc (from where, for messages).
func OpenIPC(rt *Runtime, doc *IPCIndex, where string) (*Shared, error) {
	n, err := rt.DeviceCount()
	if err != nil {
		return nil, err
	}
	s := &Shared{rt: rt, Device: -1}
	for i := range n {
		if _, uuid, err := rt.DeviceUUID(i); err == nil && strings.EqualFold(uuid, doc.UUID) {
			s.Device = i
			break
		}
	}
	if s.Device < 0 {
		return nil, fmt.Errorf("%s: device %s is not one of this process's %s (CUDA_VISIBLE_DEVICES?)", where, doc.UUID, plural(n, "CUDA device"))
	}
	for i, a := range doc.Allocations {
		raw, err := hex.DecodeString(a.Handle)
		if err != nil || len(raw) != IPCHandleSize {
			s.Close()
			return nil, fmt.Errorf("%s: allocation %d: the handle is not %d bytes of hex", where, i, IPCHandleSize)
		}
		var h [IPCHandleSize]byte
		copy(h[:], raw)
		p, err := rt.OpenIPCHandle(s.Device, h)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: allocation %d: %w", where, i, err)
		}
		s.bases = append(s.bases, p)
	}
	for _, t := range doc.Tensors {
		if t.Allocation < 0 || t.Allocation >= len(doc.Allocations) || t.Offset < 0 || t.Size < 0 || t.Offset+t.Size > doc.Allocations[t.Allocation].Size {
			s.Close()
			return nil, fmt.Errorf("%s: tensor %q lies outside its allocation", where, t.Name)
		}
		dt, err := dtype.Parse(t.DType)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: tensor %q: %v", where, t.Name, err)
		}
		tt := Tensor{Name: t.Name, DType: dt, Shape: t.Shape, Size: t.Size, Offset: t.Offset}
		if t.Size > 0 {
			tt.Ptr = s.bases[t.Allocation] + DevicePtr(t.Offset)
		}
		s.Tensors = append(s.Tensors, tt)
	}
	return s, nil
}

// Close unmaps the allocations (cudaIpcCloseMemHandle).
func (s *Shared) Close() error {
	var first error
	for _, p := range s.bases {
		if err := s.rt.CloseIPCHandle(p); err != nil && first == nil {
			first = err
		}
	}
	s.bases = nil
	return first
}
