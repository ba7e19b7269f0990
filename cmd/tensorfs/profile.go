package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startCPUProfile starts the --cpuprofile of command cmd, written to
// path; "" profiles nothing. stop ends the profile and closes the file.
func startCPUProfile(cmd, path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: --cpuprofile: %v", cmd, err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("%s: --cpuprofile: %v", cmd, err)
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// startHeapProfile creates the --memprofile of command cmd, path; ""
// profiles nothing. stop writes the heap profile (as of a collection
// made then) and closes the file.
func startHeapProfile(cmd, path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: --memprofile: %v", cmd, err)
	}
	return func() {
		runtime.GC() // the profile shows the heap as of the last GC
		pprof.WriteHeapProfile(pf)
		pf.Close()
	}, nil
}
