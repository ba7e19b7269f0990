package main

import (
	"fmt"
	"os"
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
