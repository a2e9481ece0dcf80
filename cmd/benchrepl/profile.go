package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts a CPU profile into cpuFile and records where goroutines block for
// blockFile (either may be ""); the returned function writes and closes them.
func startProfiles(cpuFile, blockFile string) (func(), error) {
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if blockFile != "" {
		f, err := os.Create(blockFile)
		if err != nil {
			stop()
			return nil, err
		}
		runtime.SetBlockProfileRate(10000) // one sample per 10 µs blocked
		stops = append(stops, func() {
			_ = pprof.Lookup("block").WriteTo(f, 0)
			f.Close()
			runtime.SetBlockProfileRate(0)
		})
	}
	return stop, nil
}
