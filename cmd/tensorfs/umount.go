package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"

	"github.com/lazyweights/tensorfs/fs"
)

const umountAbout = `
Unmounts the tensorfs mount at MOUNTPOINT; its server then exits 0. Also
clears a dead mount left by a killed server ("transport endpoint is not
connected"). A live mount with files open in it is left alone with an
error. Another FUSE file system mounted there (sshfs, rclone...) is
refused unless --force is given; a mount that is not FUSE is always
refused. Uses umount(2) as root and fusermount3 otherwise.`

func runUmount(args []string) error {
	f := newFlags("umount", "[--force] MOUNTPOINT", umountAbout)
	force := f.Bool("force", false, "unmount whatever FUSE file system is mounted at MOUNTPOINT, not only a tensorfs one")
	if err := f.parse(args, 1, 1); err != nil {
		return err
	}
	mp := f.Arg(0)
	m, ok := fs.FindMount(mp)
	if !ok {
		if _, err := os.Lstat(mp); errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("%s: no such file or directory", mp)
		}
		return fmt.Errorf("%s is not a mount point: nothing is mounted there", mp)
	}
	if !m.Tensorfs() && !*force {
		if !m.FUSE {
			return fmt.Errorf("%s is a %s mount, not a tensorfs mount; not unmounting it", mp, m.FSType)
		}
		return fmt.Errorf("%s is a %s mount (of %s), not a tensorfs mount; not unmounting it (--force unmounts any FUSE mount)", mp, m.FSType, m.Source)
	}
	return fs.Unmount(mp)
}
