// Package cli gives the hub, peer and nmcr commands one shape, so an operator who learnt one
// knows the others:
//
//   - `hub -h` (or `hub help`) lists the subcommands with one line each; `hub help token`
//     and `hub token -h` explain one; every subcommand answers -h with its flags, on stdout,
//     exit status 0;
//   - `hub --version` (or `hub -v`, `hub version`) prints the module version and the VCS
//     revision it was built from;
//   - a mistake is one line on stderr saying what is wrong and which help to read, exit
//     status 2: an unknown command, an unknown flag, a bad or missing argument;
//   - every flag can also be set as an environment variable NOMICORE_<FLAG> (package
//     envflag); the command line wins; flags and operands may come in any order.
//
// A command is a Group of Commands (a Group is itself a Command, for `hub token add`);
// each command parses its flags with Flags.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/nomicore/nomicore/node/cli/envflag"
)

// IO is what a command reads and writes: its standard streams and its environment.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Command is one subcommand: its name, the one line its parent's help shows, and what runs
// it with the arguments after its name. Run returns the process exit status.
type Command struct {
	Name    string
	Summary string
	Run     func(args []string, io IO) int
}

// Group is a command made of subcommands (`hub`, `hub token`, `nmcr doc`).
type Group struct {
	// Path is the command line that names the group: "hub", "hub token".
	Path string
	// About says what the group is, a sentence or two for its help.
	About    string
	Commands []Command
	// Default is the command that runs when the arguments are empty or start with a flag
	// (`hub` alone means `hub serve`); empty means a subcommand is required.
	Default string
	// Version makes `--version`, `-v` and `version` print the build's version (top level
	// only); `version` is listed with the commands.
	Version bool
	// Footer ends the help (where to read more).
	Footer string
}

// Command returns g as a subcommand of its parent.
func (g Group) Command(name, summary string) Command {
	return Command{Name: name, Summary: summary, Run: g.Run}
}

// Run dispatches args to a subcommand.
func (g Group) Run(args []string, io IO) int {
	if len(args) == 0 {
		if g.Default != "" {
			return g.find(g.Default).Run(nil, io)
		}
		fmt.Fprintf(io.Stderr, "%s: a command is required; see \"%s -h\"\n", g.Path, g.Path)
		return 2
	}
	switch a := args[0]; {
	case a == "-h" || a == "-help" || a == "--help":
		g.Help(io.Stdout)
		return 0
	case a == "help":
		if len(args) == 1 {
			g.Help(io.Stdout)
			return 0
		}
		if c := g.find(args[1]); c != nil {
			return c.Run(append([]string{"-h"}, args[2:]...), io)
		}
		if g.Version && args[1] == "version" {
			fmt.Fprintf(io.Stdout, "usage: %s version (or %s --version, %s -v)\n\nPrints the version and the revision this binary was built from.\n",
				g.Path, g.Path, g.Path)
			return 0
		}
		return g.unknown(args[1], io)
	case g.Version && (a == "--version" || a == "-version" || a == "-v" || a == "version"):
		fmt.Fprintln(io.Stdout, Version(g.Path))
		return 0
	case strings.HasPrefix(a, "-") && g.Default != "":
		return g.find(g.Default).Run(args, io)
	case strings.HasPrefix(a, "-"):
		fmt.Fprintf(io.Stderr, "%s: %s before a command; see \"%s -h\"\n", g.Path, a, g.Path)
		return 2
	}
	if c := g.find(args[0]); c != nil {
		return c.Run(args[1:], io)
	}
	return g.unknown(args[0], io)
}

func (g Group) find(name string) *Command {
	for i := range g.Commands {
		if g.Commands[i].Name == name {
			return &g.Commands[i]
		}
	}
	return nil
}

// versionSummary is the line `version` has in a group's help.
const versionSummary = "print the version and the revision this binary was built from"

// unknown refuses a command name, listing every command the group has (version included).
func (g Group) unknown(name string, io IO) int {
	names := make([]string, 0, len(g.Commands)+1)
	for _, c := range g.Commands {
		names = append(names, c.Name)
	}
	if g.Version {
		names = append(names, "version")
	}
	fmt.Fprintf(io.Stderr, "%s: unknown command %q (want %s); see \"%s -h\"\n", g.Path, name, orList(names), g.Path)
	return 2
}

// Help writes the group's help: what it is, its subcommands with one line each.
func (g Group) Help(w io.Writer) {
	var b strings.Builder
	if g.About != "" {
		b.WriteString(wrap(g.About, 0) + "\n\n")
	}
	fmt.Fprintf(&b, "usage: %s <command> [flags]\n\ncommands:\n", g.Path)
	width := 0
	for _, c := range g.Commands {
		width = max(width, len(c.Name))
	}
	if g.Version {
		width = max(width, len("version"))
	}
	for _, c := range g.Commands {
		summary := c.Summary
		if c.Name == g.Default {
			summary += " (the default command)"
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name, summary)
	}
	if g.Version {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, "version", versionSummary+" (also --version, -v)")
	}
	b.WriteString("\n" + wrap(fmt.Sprintf("Run \"%s <command> -h\" for a command's flags. %s", g.Path, g.Footer), 0) + "\n")
	io.WriteString(w, b.String())
}

// Version describes the build: the program, the module and its version, and the VCS
// revision (with "+modified" for a build from a dirty tree) when the build recorded one.
func Version(prog string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return prog + " (no build information)"
	}
	prog = strings.Fields(prog)[0]
	v := fmt.Sprintf("%s %s %s", prog, bi.Main.Path, bi.Main.Version)
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return v + " (no VCS revision recorded) " + bi.GoVersion
	}
	if modified {
		rev += "+modified"
	}
	if when != "" {
		rev += " " + when
	}
	return v + " revision " + rev + " " + bi.GoVersion
}

// Flags is a command's flag set with the text of its help.
type Flags struct {
	*flag.FlagSet
	// Synopsis is the usage line after "usage: ".
	Synopsis string
	// About says what the command does, a few sentences.
	About string

	sections []section
}

type section struct {
	title string
	names []string
}

// NewFlags returns the flags of the command named path ("hub serve").
func NewFlags(path, synopsis, about string) *Flags {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Flags{FlagSet: fs, Synopsis: synopsis, About: about}
}

// assign maps each sectioned flag to the index of its section.
func (f *Flags) assign() map[string]int {
	out := map[string]int{}
	for i, s := range f.sections {
		for _, n := range s.names {
			out[n] = i
		}
	}
	return out
}

// Parse sets the flags from the environment (NOMICORE_<FLAG>), then from args, and returns
// the operands (the arguments that are not flags, in order; flags and operands may be
// mixed; "--" ends the flags). When ok is false the command returns code: 0 after -h (the
// help is on stdout), 2 after a mistake (one line on stderr naming it and the help).
func (f *Flags) Parse(args []string, io IO) (operands []string, code int, ok bool) {
	if io.Getenv != nil {
		if err := envflag.Apply(f.FlagSet, io.Getenv); err != nil {
			return nil, f.Mistake(io, "%v", err), false
		}
	}
	rest := args
	for {
		if err := f.FlagSet.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.Help(io.Stdout)
				return nil, 0, false
			}
			return nil, f.Mistake(io, "%s", flagError(err)), false
		}
		if f.NArg() == 0 {
			return operands, 0, true
		}
		if len(rest) > 0 && len(rest)-f.NArg() > 0 && rest[len(rest)-f.NArg()-1] == "--" {
			return append(operands, f.Args()...), 0, true
		}
		operands = append(operands, f.Arg(0))
		rest = f.Args()[1:]
	}
}

// flagError rewrites the flag package's messages with the double dash the help shows.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -name: reason
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			return "invalid value " + rest[:i] + " for --" + rest[i+len(" for flag -"):]
		}
	}
	return msg
}

// Mistake writes one line on stderr, "<command>: <what is wrong>; see \"<command> -h\"",
// and returns the exit status of a usage error, 2.
func (f *Flags) Mistake(io IO, format string, args ...any) int {
	fmt.Fprintf(io.Stderr, "%s: %s; see \"%s -h\"\n", f.Name(), fmt.Sprintf(format, args...), f.Name())
	return 2
}

// Help writes the command's help: its usage line, what it does, and its flags, each with
// its environment variable, grouped in the sections the command defined.
func (f *Flags) Help(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n", f.Synopsis)
	if f.About != "" {
		b.WriteString("\n" + wrap(f.About, 0) + "\n")
	}
	groups := make([][]*flag.Flag, len(f.sections)+1)
	assigned := f.assign()
	f.VisitAll(func(fl *flag.Flag) {
		i, ok := assigned[fl.Name]
		if !ok {
			groups[0] = append(groups[0], fl)
			return
		}
		groups[i+1] = append(groups[i+1], fl)
	})
	for i, flags := range groups {
		if len(flags) == 0 {
			continue
		}
		if i == 0 {
			b.WriteString("\nflags:\n")
		} else {
			fmt.Fprintf(&b, "\n%s:\n", f.sections[i-1].title)
		}
		for _, fl := range flags {
			name, usage := flag.UnquoteUsage(fl)
			line := "  --" + fl.Name
			if name != "" {
				line += " " + name
			}
			b.WriteString(line + "\n")
			text := usage
			if def := fl.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
				text += " (default " + def + ")"
			}
			b.WriteString(wrap(text, 8) + "\n")
		}
	}
	var example string
	f.VisitAll(func(fl *flag.Flag) {
		if example == "" || fl.Name == "admin-listen" {
			example = fl.Name
		}
	})
	if example != "" {
		fmt.Fprintf(&b, "\nEvery flag can also be set as NOMICORE_<FLAG> (--%s: %s).\n", example, envflag.Name(example))
	}
	io.WriteString(w, b.String())
}

// Define lists the flags fn defines under title in the help (the others come first, under
// "flags").
func (f *Flags) Define(title string, fn func()) {
	before := map[string]bool{}
	f.VisitAll(func(fl *flag.Flag) { before[fl.Name] = true })
	fn()
	s := section{title: title}
	f.VisitAll(func(fl *flag.Flag) {
		if !before[fl.Name] {
			s.names = append(s.names, fl.Name)
		}
	})
	f.sections = append(f.sections, s)
}

// wrap breaks text into lines of at most 92 columns, each indented by indent spaces;
// existing line breaks are kept.
func wrap(text string, indent int) string {
	const width = 92
	pad := strings.Repeat(" ", indent)
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := pad
		for _, word := range strings.Fields(para) {
			if len(line) > indent && len(line)+1+len(word) > width {
				out = append(out, line)
				line = pad
			}
			if len(line) > indent {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	names = slices.Clone(names)
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ShellArg quotes s for a shell command line, when it needs quoting, so that a command a
// message suggests runs as printed.
func ShellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
