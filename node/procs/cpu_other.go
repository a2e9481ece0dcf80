//go:build !unix

package procs

import "time"

// Without getrusage the Governor does not run: --procs auto leaves the runtime's default.
const cpuTimeAvailable = false

func processCPU() time.Duration { return 0 }
