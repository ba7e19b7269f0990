package formats

import (
	"fmt"
	"os"
	"path/filepath"

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
	head, err := index.ReadHead(meta, dcp.SniffLen)
	if err != nil {
		return nil, true, err
	}
	if !dcp.Sniff(head) {
		return nil, false, nil
	}
	d := dcp.Dir{Path: dir, Files: files, Open: l.open}
	if l.inflate != nil {
		o := l.inflate.Options()
		d.MaxDecoded = max(o.MemLimit/4, o.DiskLimit) // backing.InflateCache.OpenMember's limit
	}
	if l.tree == nil {
		d.Inside = func(p string) error { return insideDir(dir, p) }
	}
	idx, dfiles, err := dcp.ParseDir(d, meta)
	if err != nil {
		return nil, true, err
	}
	for _, f := range dfiles {
		l.files = append(l.files, asSource(f))
	}
	for i := range idx.Members {
		m := &idx.Members[i]
		src, err := l.openMember(idx.SourceName(m.Source), l.files, m)
		if _, zstd := m.Kind.(*index.Zstd); err != nil && zstd {
			return nil, true, err // names its .distcp and item
		}
		if err != nil {
			return nil, true, index.ErrorAt(mp, "tensor "+fmt.Sprintf("%q", m.Name), "%v", err)
		}
		l.files = append(l.files, src)
	}
	return idx, true, nil
}

// insideDir refuses a file of dir that is a symbolic link to something
// other than a regular file (a distributed checkpoint's items name files
// by relative path). A link to a regular file is followed wherever it
// leads, as torch follows it: a Hugging Face cache snapshot's .distcp are
// links to ../../blobs/SHA256.
func insideDir(dir, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink == 0 {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", filepath.Base(p), st.Mode().Type())
		}
		return nil
	}
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("%s is a symbolic link that cannot be followed", filepath.Base(p))
	}
	if ts, err := os.Stat(rp); err != nil || !ts.Mode().IsRegular() {
		what := "nothing"
		if err == nil {
			what = "a " + ts.Mode().Type().String() + " file, not a regular one"
			if ts.IsDir() {
				what = "a directory"
			}
		}
		return fmt.Errorf("%s is a symbolic link to %s, which is %s", filepath.Base(p), rp, what)
	}
	return nil
}
