// Command hfserve runs backing/hf/hftest's loopback Hub and CDN over the
// files of a directory, for benchmarks (docs/scripts/hf_bench.sh):
//
//	hfserve DIR ORG/NAME
//
// commits every file under DIR to ORG/NAME at main (files of 1 MiB or
// more in LFS, served by the CDN through resolve's 302; the others in
// git), prints the Hub's URL on stdout and serves until killed. The files
// are held in memory.
package main

import (
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/lazyweights/tensorfs/backing/hf/hftest"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: hfserve DIR ORG/NAME")
	}
	dir, repo := os.Args[1], os.Args[2]
	var files []hftest.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, hftest.File{Path: filepath.ToSlash(rel), Data: b, LFS: len(b) >= 1<<20})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	s := hftest.New()
	s.Commit(repo, "main", files...)
	fmt.Println(s.Hub.URL)
	select {}
}
