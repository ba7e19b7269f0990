package torch

import (
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// ParsePickle reads f, one bare pickle (not a torch.save file: no
// storages), through env (nil: pickle.PlainEnv) and walks the value it
// builds as a torch pickle is walked: every numpy array is a tensor under
// its keys joined by "/" (served from its range of the file, or as a
// Latin-1 member), every other value metadata. It is how other formats
// that pickle numpy arrays (PaddlePaddle's .pdparams) are read; format
// is the Index's Format. Bytes after the pickle's STOP refuse the file.
func ParsePickle(f index.File, env pickle.Env, format string) (*index.Index, any, error) {
	file := f.Name()
	size := f.Size()
	if env == nil {
		env = pickle.PlainEnv{}
	}
	st := ptStream{file: file, base: 0, size: size}
	m := st.machine(io.NewSectionReader(f, 0, size), env)
	root, err := m.Run()
	if err != nil {
		return nil, nil, st.err(err)
	}
	if at := m.Pos(); at != size {
		return nil, nil, index.Errorf(file, at, "%d bytes after the end of the pickle", size-at)
	}
	w := newPtWalker(st, func(s *torchStorage) (int, int64, int64, string) {
		return 0, 0, 0, fmt.Sprintf("a torch storage (%q) in a bare pickle that has no storages", s.key)
	})
	w.m = m
	idx, err := ptFinish(w, root, format)
	if err != nil {
		return nil, nil, err
	}
	return idx, root, nil
}
