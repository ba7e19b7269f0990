package bench

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/lazyweights/tensorfs/fs"
)

// ServeNull is the zero-work server's process ("tensorfs bench
// --serve-null MANIFEST MOUNTPOINT [MOUNT FLAGS]"): it mounts the files
// MANIFEST lists (one "SIZE<TAB>PATH" line each) with fs.MountNull and
// serves them until unmounted or signalled. Of the mount flags it takes
// the ones that shape requests (--max-write, --readahead-kb,
// --max-background, and --no-splice, which makes requests 1 MiB as it
// does for tensorfs); the others change nothing a zero-work server does.
func ServeNull(manifest, mountpoint string, flags []string) error {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	var files []fs.NullFile
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		size, p, ok := strings.Cut(sc.Text(), "\t")
		n, err := strconv.ParseInt(size, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("%s: bad line %q", manifest, sc.Text())
		}
		files = append(files, fs.NullFile{Path: p, Size: n})
	}
	var mopts fs.MountOptions
	splice := true
	for i := 0; i < len(flags); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(flags[i], "-"), "=")
		intVal := func() int {
			if !hasVal && i+1 < len(flags) {
				i++
				val = flags[i]
			}
			v, _ := strconv.Atoi(val)
			return v
		}
		switch name {
		case "max-write":
			mopts.MaxWrite = intVal()
		case "readahead-kb":
			mopts.ReadAheadKB = intVal()
		case "max-background":
			mopts.MaxBackground = intVal()
		case "no-splice":
			splice = false
		}
	}
	if mopts.MaxWrite == 0 {
		mopts.MaxWrite = fs.MaxReadSize(splice)
	}
	mopts.Logger = log.New(os.Stderr, "tensorfs null server: ", 0)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	server, err := fs.MountNull(mountpoint, files, mopts)
	if err != nil {
		return err
	}
	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
	select {
	case <-served:
		return nil
	case <-sigs:
	}
	if err := server.Unmount(); err != nil {
		return fs.Detach(mountpoint)
	}
	<-served
	return nil
}
