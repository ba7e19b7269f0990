// Command hfserve runs backing/hf/hftest's loopback Hub and CDN over the
// files of a directory, for benchmarks (docs/scripts/hf_bench.sh):
//
//	hfserve [-xet] DIR ORG/NAME
//
// commits every file under DIR to ORG/NAME at main (files of 1 MiB or
// more in LFS, served by the CDN through resolve's 302, or with -xet in
// Xet, served by the Xet bridge; the others in git), prints the Hub's URL
// on stdout and serves until killed. The files are held in memory. On
// SIGUSR1 it prints its request counts on stderr, one line ("requests:
// hub N cdn N bridge N"), for a benchmark's count of GETs.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lazyweights/tensorfs/backing/hf/hftest"
)

func main() {
	xet := flag.Bool("xet", false, "store the files of 1 MiB or more in Xet, not LFS")
	flag.Parse()
	if flag.NArg() != 2 {
		log.Fatal("usage: hfserve [-xet] DIR ORG/NAME")
	}
	dir, repo := flag.Arg(0), flag.Arg(1)
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
		big := len(b) >= 1<<20
		files = append(files, hftest.File{Path: filepath.ToSlash(rel), Data: b, LFS: big && !*xet, Xet: big && *xet})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	s := hftest.New()
	s.Commit(repo, "main", files...)
	fmt.Println(s.Hub.URL)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for range usr1 {
		fmt.Fprintf(os.Stderr, "requests: hub %d cdn %d bridge %d\n", s.HubRequests.Load(), s.CDNRequests.Load(), s.BridgeRequests.Load())
	}
}
