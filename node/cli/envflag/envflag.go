// Package envflag lets every command-line flag of the Nomicore commands also be set from
// the environment, so that a container or a service manager can configure them without a
// command line: flag --token-file reads NOMICORE_TOKEN_FILE, and a value given on the
// command line wins over the environment.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable of a flag: NOMICORE_ and the flag name in capitals
// with dashes as underscores.
func Name(flagName string) string {
	return "NOMICORE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Apply sets each flag of fs from its environment variable when that is set and non-empty.
// Call it before fs.Parse, so flags given on the command line override the environment. A
// repeatable flag takes a comma-separated list from its variable only if its Value accepts
// that form itself. It returns the first value its flag refuses, naming the variable.
func Apply(fs *flag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := Name(f.Name)
		if v := getenv(name); v != "" && err == nil {
			// Through the flag set, so that fs.Visit counts the flag as set.
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}
