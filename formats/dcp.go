package formats

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp"
)

// claimDCP claims a directory whose files hold a .metadata that
// index/dcp recognises, left open for loadDCP; otherwise nothing is left
// open and the directory is read as any other.
func claimDCP(d *Dir) (bool, error) {
	mp, has := dcp.MetadataFile(d.Files)
	if !has {
		return false, nil
	}
	meta, err := d.Open(mp)
	if err != nil {
		return true, err
	}
	head, err := index.ReadHead(meta, dcp.SniffLen)
	if err != nil {
		return true, err
	}
	if !dcp.Sniff(head) {
		d.Release(meta)
		return false, nil
	}
	return true, nil
}

// loadDCP loads a directory claimDCP claimed as a PyTorch Distributed
// Checkpoint.
func loadDCP(dd *Dir) (*index.Index, error) {
	l, dir, files := dd.l, dd.Path, dd.Files
	mp, _ := dcp.MetadataFile(files)
	meta, err := dd.Open(mp) // claimDCP's
	if err != nil {
		return nil, err
	}
	defer dd.Release(meta)
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
		return nil, err
	}
	for _, f := range dfiles {
		l.files = append(l.files, asSource(f))
	}
	for i := range idx.Members {
		m := &idx.Members[i]
		src, err := l.openMember(idx.SourceName(m.Source), l.files, m)
		if _, zstd := m.Kind.(*index.Zstd); err != nil && zstd {
			return nil, err // names its .distcp and item
		}
		if err != nil {
			return nil, index.ErrorAt(mp, "tensor "+fmt.Sprintf("%q", m.Name), "%v", err)
		}
		l.files = append(l.files, src)
	}
	return idx, nil
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
