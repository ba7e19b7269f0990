package formats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp"
)

// dcpDir loads dir as a PyTorch Distributed Checkpoint when files hold a
// .metadata that index/dcp recognises (ok); otherwise nothing is left
// open and dir is read as any other directory.
func (l *loader) dcpDir(dir string, files []string) (idx *index.Index, ok bool, err error) {
	mp, has := dcp.MetadataFile(files)
	if !has {
		return nil, false, nil
	}
	meta, err := l.openFile(mp)
	if err != nil {
		return nil, true, err
	}
	defer l.release(meta)
	head := make([]byte, dcp.SniffLen)
	n, _ := meta.ReadAt(head, 0)
	if !dcp.Sniff(head[:n]) {
		return nil, false, nil
	}
	d := dcp.Dir{Path: dir, Files: files, Open: l.open}
	if l.tree == nil {
		d.Inside = func(p string) error { return insideDir(dir, p) }
	}
	idx, dfiles, err := dcp.ParseDir(d, meta)
	if err != nil {
		return nil, true, err
	}
	l.files = append(l.files, dfiles...)
	for i := range idx.Members {
		m := &idx.Members[i]
		src, err := l.openMember(idx.SourceName(m.Source), l.files, m)
		if err != nil {
			return nil, true, index.ErrorAt(mp, "tensor "+fmt.Sprintf("%q", m.Name), "%v", err)
		}
		l.files = append(l.files, src)
	}
	return idx, true, nil
}

// insideDir refuses a file of dir that is a symbolic link leading out of
// it (a distributed checkpoint's items name files by relative path).
func insideDir(dir, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	rd, err1 := filepath.EvalSymlinks(dir)
	rp, err2 := filepath.EvalSymlinks(p)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%s is a symbolic link that cannot be followed", filepath.Base(p))
	}
	if rel, err := filepath.Rel(rd, rp); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is a symbolic link out of the checkpoint's directory (to %s)", filepath.Base(p), rp)
	}
	return nil
}
