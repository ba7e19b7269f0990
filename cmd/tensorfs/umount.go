package main

import "github.com/lazyweights/tensorfs/fs"

const umountAbout = `
Unmounts the tensorfs (or any FUSE) mount at MOUNTPOINT; its server then
exits 0. Also clears a dead mount left by a killed server ("transport
endpoint is not connected"). A live mount with files open in it is left
alone with an error. Uses umount(2) as root and fusermount3 otherwise.`

func runUmount(args []string) error {
	f := newFlags("umount", "MOUNTPOINT", umountAbout)
	if err := f.parse(args, 1, 1); err != nil {
		return err
	}
	return fs.Unmount(f.Arg(0))
}
