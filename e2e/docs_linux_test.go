package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The shell blocks of README.md and docs/*.md, run as a reader would run them.
//
// Every ```sh block is read. A block that starts a server (hub serve, peer run, make run)
// must say, in an HTML comment on the line before it, how it is tested — the comment is
// invisible on the rendered page:
//
//	<!-- doctest: background HOST:PORT -->  a terminal of its own that keeps running (a server in
//	                                         the foreground); the blocks after it start once
//	                                         HOST:PORT accepts connections
//	<!-- doctest: run -->                    run as written; right after a background or run block
//	                                         it is the next terminal of the same walkthrough
//	<!-- doctest: machines h1 h2 h3 -->      one block for several machines: run once per machine,
//	                                         machine hN being the loopback address 127.0.0.N (the
//	                                         block's h1, h2, … are those addresses; its nN is the
//	                                         machine's number, its 0.0.0.0 and 127.0.0.1 the
//	                                         machine's address; its /var and /etc paths are under
//	                                         a directory of the machine's own)
//	<!-- doctest: fragment -->               flags of a longer command, "…" standing for the rest:
//	                                         not runnable as written, so only its flags are checked
//	<!-- doctest: skip REASON -->            run elsewhere (REASON says where)
//
// Every block, marked or not, has each flag it gives to hub, peer or nmcr checked against
// that command's help.
//
// A walkthrough (the blocks run together) runs in a private network namespace, with a
// loopback of its own, in a fresh directory standing for the repository's root: ports are
// used exactly as the Markdown writes them, and the servers' defaults are the shipped
// ones, so two processes of a walkthrough that would take the same port fail here as they
// would for a reader, and no other test or program on the machine can take a port from
// it. `make` there runs the repository's Makefile (only `make build`, which writes the
// binaries into the walkthrough's bin/). Each walkthrough runs with bash -e -o pipefail:
// a command that fails fails the test; then the checks below (docChecks) look at what it
// left running. The walkthrough ends with the test: every process it started lives in a
// PID namespace of its own, which the kernel empties when the test's process there exits.

// docFiles are the Markdown files whose shell blocks are read, relative to the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// docBlock is one ```sh block.
type docBlock struct {
	file    string // relative to the repository: README.md, docs/cluster.md
	line    int    // of the opening fence
	heading string // the nearest heading above it
	text    string
	mode    string   // the marker's first word: background, run, machines, fragment, skip; "" without one
	args    []string // the marker's other words
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var markerRE = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)

// readDocBlocks returns the shell blocks of the documentation, in file order.
func readDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	var out []docBlock
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("..", path)
		lines := strings.Split(string(data), "\n")
		heading, inFence := "", false
		var cur *docBlock
		for i, line := range lines {
			switch {
			case cur != nil && strings.HasPrefix(line, "```"):
				out = append(out, *cur)
				cur, inFence = nil, false
			case cur != nil:
				cur.text += line + "\n"
			case strings.HasPrefix(line, "```"):
				if inFence {
					inFence = false
					continue
				}
				if info := strings.TrimSpace(strings.TrimPrefix(line, "```")); info != "sh" {
					inFence = true
					continue
				}
				cur = &docBlock{file: rel, line: i + 1, heading: heading}
				for j := i - 1; j >= 0; j-- {
					prev := strings.TrimSpace(lines[j])
					if prev == "" {
						continue
					}
					if m := markerRE.FindStringSubmatch(prev); m != nil {
						words := strings.Fields(m[1])
						if len(words) > 0 {
							cur.mode, cur.args = words[0], words[1:]
						}
					}
					break
				}
			case !inFence && strings.HasPrefix(line, "#"):
				heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			}
		}
		if cur != nil {
			t.Fatalf("%s:%d: a shell block that does not end", rel, cur.line)
		}
	}
	return out
}

// startsServerRE finds a command that starts a server: hub serve (or hub with flags only,
// serve being its default command), peer run (or peer with flags only), make run.
var startsServerRE = regexp.MustCompile(`(?m)(^|[\s;&|(])(bin/)?(hub(\s+serve\b|\s+--|\s*$)|peer(\s+run\b|\s+--)|make\s+run\b)`)

// shellCode is a block's text without comments, its continued lines joined.
func shellCode(text string) string {
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		if i := commentStart(line); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// commentStart is where a shell comment starts in line (a # at the start or after a blank,
// outside quotes), or -1.
func commentStart(line string) int {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return i
		}
	}
	return -1
}

func TestDocs_ShellBlocks(t *testing.T) {
	if id := os.Getenv(docWalkthroughEnv); id != "" {
		runWalkthroughHere(t, id)
		return
	}
	blocks := readDocBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("no shell block found in the documentation")
	}

	t.Run("Markers", func(t *testing.T) {
		for _, b := range blocks {
			code := shellCode(b.text)
			switch b.mode {
			case "":
				if startsServerRE.MatchString(code) {
					t.Errorf("%s: this block starts a server but has no <!-- doctest: … --> marker before it "+
						"(background, run, machines, fragment or skip; e2e/docs_linux_test.go says what each means)", b.where())
				}
			case "run":
			case "background":
				if len(b.args) != 1 {
					t.Errorf("%s: <!-- doctest: background HOST:PORT --> names the address to wait for", b.where())
				}
			case "machines":
				if len(b.args) < 2 {
					t.Errorf("%s: <!-- doctest: machines h1 h2 … --> names the machines", b.where())
				}
			case "fragment":
				if !strings.Contains(b.text, "…") {
					t.Errorf("%s: a fragment shows where it leaves something out with …; without one it can run: mark it run", b.where())
				}
			case "skip":
				if len(b.args) == 0 {
					t.Errorf("%s: <!-- doctest: skip REASON --> says why and where it runs instead", b.where())
				}
			default:
				t.Errorf("%s: unknown doctest marker %q", b.where(), b.mode)
			}
		}
	})

	t.Run("Flags", func(t *testing.T) {
		helps := helpCache{}
		for _, b := range blocks {
			for _, problem := range checkBlockFlags(shellCode(b.text), helps) {
				t.Errorf("%s: %s", b.where(), problem)
			}
		}
	})

	walks := docWalkthroughs(blocks)
	names := map[string]bool{}
	for _, w := range walks {
		names[w.key()] = true
	}
	for key := range docChecks {
		if !names[key] {
			t.Errorf("docChecks has checks for %q, but no walkthrough is under that heading any more", key)
		}
	}
	if !testing.Short() {
		warmBuildCache(t)
	}
	for _, w := range walks {
		t.Run(strings.ReplaceAll(w.key(), " ", "_"), func(t *testing.T) {
			if testing.Short() {
				t.Skip("-short: the documentation's walkthroughs are not run")
			}
			t.Parallel()
			runWalkthroughInPrivateNetwork(t, w)
		})
	}
}

// warmBuildCache runs `make build` once before the walkthroughs, which run it at the same
// time: they then find every package compiled instead of compiling each three times over.
func warmBuildCache(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		return // the walkthroughs say so
	}
	out, err := exec.Command("make", "--no-print-directory", "-C", "..", "build", "BIN="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
}

// ---------- flags ----------

// helpCache keeps the help of each command path ("hub token add").
type helpCache map[string]string

var ourCommands = map[string]string{"hub": "", "bin/hub": "", "peer": "", "bin/peer": "", "nmcr": "", "bin/nmcr": ""}

func (h helpCache) help(path []string) string {
	key := strings.Join(path, " ")
	if s, ok := h[key]; ok {
		return s
	}
	exe := map[string]string{"hub": bin.hub, "peer": bin.peer, "nmcr": bin.nmcr}[path[0]]
	cmd := exec.Command(exe, append(slices.Clone(path[1:]), "-h")...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0") // a binary built with -race would wait a second at exit
	out, _ := cmd.CombinedOutput()
	h[key] = string(out)
	return string(out)
}

// subcommands lists the commands a group's help shows.
func subcommands(help string) []string {
	_, list, ok := strings.Cut(help, "\ncommands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

var flagRE = regexp.MustCompile(`^\[?(--[a-z0-9][a-z0-9-]*)`)

// checkBlockFlags checks that every flag given to hub, peer or nmcr in code is one the
// command's help lists, and that every command named exists.
func checkBlockFlags(code string, helps helpCache) []string {
	var problems []string
	seps := strings.NewReplacer(" | ", "\n", " || ", "\n", " && ", "\n", "; ", "\n", " &\n", "\n", "$(", "\n", ")", "\n")
	for _, segment := range strings.Split(seps.Replace(code+"\n"), "\n") {
		words := strings.Fields(segment)
		for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		if _, ok := ourCommands[words[0]]; !ok {
			continue
		}
		path := []string{strings.TrimPrefix(words[0], "bin/")}
		rest := words[1:]
		known := true
		for {
			subs := subcommands(helps.help(path))
			if len(subs) == 0 {
				break
			}
			if len(rest) > 0 && slices.Contains(subs, rest[0]) {
				path, rest = append(path, rest[0]), rest[1:]
				continue
			}
			if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				problems = append(problems, fmt.Sprintf("%q: %s has no command %q (it has %s)", strings.TrimSpace(segment), strings.Join(path, " "), rest[0], strings.Join(subs, ", ")))
				known = false
				break
			}
			def := map[string]string{"hub": "serve", "peer": "run"}[strings.Join(path, " ")]
			if def == "" {
				if len(rest) == 0 || !slices.Contains([]string{"-h", "--help", "-v", "--version"}, rest[0]) {
					problems = append(problems, fmt.Sprintf("%q: %s needs a command", strings.TrimSpace(segment), strings.Join(path, " ")))
				}
				known = false
				break
			}
			path = append(path, def)
		}
		if !known {
			continue
		}
		help := helps.help(path)
		for _, w := range rest {
			m := flagRE.FindStringSubmatch(w)
			if m == nil || m[1] == "--help" || m[1] == "--version" {
				continue
			}
			if !strings.Contains(help, "\n  "+m[1]+" ") && !strings.Contains(help, "\n  "+m[1]+"\n") {
				problems = append(problems, fmt.Sprintf("%s has no flag %s (%q)", strings.Join(path, " "), m[1], strings.TrimSpace(segment)))
			}
		}
	}
	return problems
}

// ---------- walkthroughs ----------

// docWalkthrough is the blocks that run together: a background block and the run blocks
// after it, a run block and the run blocks right after it, or a machines block alone.
type docWalkthrough struct {
	blocks []docBlock
}

// key names a walkthrough by its file and heading: "docs/cluster.md#Starting three nodes on one machine".
func (w docWalkthrough) key() string { return w.blocks[0].file + "#" + w.blocks[0].heading }

func docWalkthroughs(blocks []docBlock) []docWalkthrough {
	var out []docWalkthrough
	for i, b := range blocks {
		switch b.mode {
		case "background", "machines":
			out = append(out, docWalkthrough{blocks: []docBlock{b}})
		case "run":
			prev := blocks[max(i-1, 0)]
			if i > 0 && prev.file == b.file && (prev.mode == "background" || prev.mode == "run") {
				out[len(out)-1].blocks = append(out[len(out)-1].blocks, b)
				continue
			}
			out = append(out, docWalkthrough{blocks: []docBlock{b}})
		}
	}
	return out
}

// runWalkthroughInPrivateNetwork runs the walkthrough in this test binary started again in
// new network and PID namespaces (and a user namespace when not root), and reports its
// outcome.
func runWalkthroughInPrivateNetwork(t *testing.T, w docWalkthrough) {
	for _, tool := range []string{"bash", "curl", "make", "go", "sed", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			requireOrSkip(t, "the documentation's walkthroughs need "+tool+": "+err.Error())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestDocs_ShellBlocks$", "-test.v", "-test.count=1", "-test.timeout", "5m")
	cmd.Env = append(os.Environ(), docWalkthroughEnv+"="+w.key())
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		// The namespaces could not be made (a container that forbids them, say).
		requireOrSkip(t, "a private network namespace for the documentation's walkthroughs: "+err.Error())
	case err != nil:
		t.Fatalf("%s, run as written: %v\n%s", w.key(), err, out)
	case !strings.Contains(string(out), "\nPASS\n") && !strings.HasPrefix(string(out), "PASS\n"):
		t.Fatalf("%s: the run in the private network namespace did not pass:\n%s", w.key(), out)
	}
	if testing.Verbose() {
		t.Logf("%s:\n%s", w.key(), out)
	}
}

// requireOrSkip skips the test loudly, or fails it under NOMICORE_REQUIRE_ORACLE=1 (CI).
func requireOrSkip(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("NOMICORE_REQUIRE_ORACLE") == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED LOUDLY: " + msg)
}

// runWalkthroughHere runs the walkthrough key in this process's namespaces (the private
// ones runWalkthroughInPrivateNetwork made).
func runWalkthroughHere(t *testing.T, key string) {
	var w *docWalkthrough
	for _, x := range docWalkthroughs(readDocBlocks(t)) {
		if x.key() == key {
			w = &x
		}
	}
	if w == nil {
		t.Fatalf("no walkthrough %q", key)
	}
	if err := loopbackUp(); err != nil {
		t.Fatalf("bringing the private network's loopback up: %v", err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	s := newDocSandbox(t, repo)
	t.Cleanup(endEveryProcess)
	if w.blocks[0].mode == "machines" {
		s.runMachines(w.blocks[0])
	} else {
		s.runTerminals(w.blocks)
	}
	check := docChecks[w.key()]
	if check == nil {
		t.Logf("%s ran as written (no further checks)", w.key())
		return
	}
	check(t, s)
}

// endEveryProcess kills every process of the walkthrough's PID namespace but this one (its
// first process, which the others' orphans were handed to) and reaps them, so that the
// servers are gone before their directory is removed. Outside a PID namespace of its own
// (not process 1) it does nothing: kill(-1) would reach the whole machine's processes.
func endEveryProcess() {
	if os.Getpid() != 1 {
		return
	}
	syscall.Kill(-1, syscall.SIGKILL)
	for {
		if _, err := syscall.Wait4(-1, nil, 0, nil); err != nil && err != syscall.EINTR {
			return // ECHILD: none left
		}
	}
}

// loopbackUp brings the interface lo up (a new network namespace has it down).
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then the flags (a short)
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	flags := (*uint16)(unsafe.Pointer(&ifr[syscall.IFNAMSIZ]))
	*flags |= syscall.IFF_UP | syscall.IFF_RUNNING
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	return nil
}

// docSandbox is the directory a walkthrough runs in, standing for the repository's root.
type docSandbox struct {
	t    *testing.T
	dir  string
	env  []string
	vars map[string]string // the shell variables the terminals' blocks left set
	out  string            // what the terminals' blocks wrote (stdout and stderr)
	logs []string          // every output file, shown when the walkthrough fails
}

func newDocSandbox(t *testing.T, repo string) *docSandbox {
	dir := t.TempDir()
	shims := filepath.Join(dir, ".doctest", "bin")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	// make runs the repository's Makefile, its build target only, writing into ./bin.
	makeShim := `#!/usr/bin/env bash
set -euo pipefail
if [ "$*" != build ]; then echo "doctest: only 'make build' runs in a walkthrough, not 'make $*'" >&2; exit 2; fi
exec ` + shellQuote(mustLookPath(t, "make")) + ` --no-print-directory -C ` + shellQuote(repo) + ` build BIN="$PWD/bin"
`
	if err := os.WriteFile(filepath.Join(shims, "make"), []byte(makeShim), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &docSandbox{t: t, dir: dir, vars: map[string]string{}}
	s.env = append(os.Environ(), "PATH="+shims+":"+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"))
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range s.logs {
				t.Logf("--- %s:\n%s", strings.TrimPrefix(l, dir+"/"), tail(l, 40))
			}
			for _, l := range s.serverLogs() {
				t.Logf("--- %s (last lines):\n%s", strings.TrimPrefix(l, dir+"/"), tail(l, 15))
			}
		}
	})
	return s
}

// serverLogs are the *.log files the walkthrough's commands wrote.
func (s *docSandbox) serverLogs() []string {
	var logs []string
	filepath.WalkDir(s.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".log") && !strings.Contains(p, "/.doctest/") {
			logs = append(logs, p)
		}
		return nil
	})
	return logs
}

func mustLookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// script writes a block (or several) as a bash script under .doctest and returns its path.
func (s *docSandbox) script(name, body string) string {
	p := filepath.Join(s.dir, ".doctest", name+".sh")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// start runs a script in dir with bash -e -o pipefail, its output into a file of its own.
func (s *docSandbox) start(name, dir, body string, env []string) (*exec.Cmd, string) {
	path := s.script(name, body)
	outPath := filepath.Join(s.dir, ".doctest", name+".out")
	out, err := os.Create(outPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.logs = append(s.logs, outPath)
	cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-o", "pipefail", path)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	out.Close()
	return cmd, outPath
}

// wait waits for a script to end within limit.
func (s *docSandbox) wait(what string, cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s failed: %v", what, err)
		}
		return nil
	case <-time.After(limit):
		cmd.Process.Kill()
		return fmt.Errorf("%s did not end within %v", what, limit)
	}
}

// waitListening waits until addr accepts TCP connections, or the background script ended.
func (s *docSandbox) waitListening(what, addr string, cmd *exec.Cmd, limit time.Duration) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(limit)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			s.t.Fatalf("%s ended (%v) before %s accepted connections", what, err, addr)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %s does not accept connections after %v", what, addr, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// varsDump, appended to a terminal's script, writes its shell variables for the checks.
const varsDump = "\n( set -o posix; set ) > .doctest/vars\n"

// runTerminals runs a background block in a terminal of its own, then the run blocks after
// it, together, in another (so the variables one sets reach the next).
func (s *docSandbox) runTerminals(blocks []docBlock) {
	i := 0
	start := time.Now()
	if b := blocks[0]; b.mode == "background" {
		cmd, _ := s.start("terminal-1", s.dir, b.text, s.env)
		s.waitListening(b.where(), b.args[0], cmd, 4*time.Minute)
		s.t.Logf("%s: %s accepts connections after %v", b.where(), b.args[0], time.Since(start).Round(time.Millisecond))
		i = 1
	}
	if i == len(blocks) {
		return
	}
	var body strings.Builder
	for _, b := range blocks[i:] {
		fmt.Fprintf(&body, "# %s\n%s\n", b.where(), b.text)
	}
	body.WriteString(varsDump)
	cmd, outPath := s.start("terminal-2", s.dir, body.String(), s.env)
	err := s.wait(blocks[i].where(), cmd, 4*time.Minute)
	b, _ := os.ReadFile(outPath)
	s.out = string(b)
	if err != nil {
		s.t.Fatalf("%v; it wrote:\n%s", err, s.out)
	}
	s.t.Logf("%s: ran in %v", blocks[i].where(), time.Since(start).Round(time.Millisecond))
	s.readVars()
}

func (s *docSandbox) readVars() {
	f, err := os.Open(filepath.Join(s.dir, ".doctest", "vars"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			s.vars[k] = strings.Trim(v, "'")
		}
	}
}

// machineWordRE finds what a machines block names of the machine it runs on, and the
// machines it reaches.
var machineWordRE = regexp.MustCompile(`\bnN\b|\b0\.0\.0\.0\b|\b127\.0\.0\.1\b|(^|[\s=:,])(/var/|/etc/)|\bh[0-9]+\b`)

// runMachines runs a machines block once on each machine: hN is the loopback address
// 127.0.0.N, the block's nN is the machine's number, its 0.0.0.0 and 127.0.0.1 are its own
// address, and its /var and /etc paths are in a directory of the machine's own. The
// listeners' defaults follow the machine's address (NOMICORE_LISTEN and the others, as a
// machine's own loopback would be). The binaries are installed on every machine first
// (make build).
func (s *docSandbox) runMachines(b docBlock) {
	build, _ := s.start("install", s.dir, "make build\n", s.env)
	if err := s.wait("make build", build, 4*time.Minute); err != nil {
		s.t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for n, name := range b.args {
		n++
		addr := fmt.Sprintf("127.0.0.%d", n)
		if name != fmt.Sprintf("h%d", n) {
			s.t.Fatalf("%s: the machines are named h1, h2, …, in order; not %q", b.where(), name)
		}
		root := filepath.Join(s.dir, name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			s.t.Fatal(err)
		}
		text := machineWordRE.ReplaceAllStringFunc(b.text, func(w string) string {
			switch {
			case w == "nN":
				return fmt.Sprintf("n%d", n)
			case w == "0.0.0.0" || w == "127.0.0.1":
				return addr
			case strings.HasSuffix(w, "/var/") || strings.HasSuffix(w, "/etc/"):
				i := strings.Index(w, "/")
				return w[:i] + root + w[i:]
			}
			var k int
			fmt.Sscanf(w, "h%d", &k)
			if k < 1 || k > len(b.args) {
				s.t.Fatalf("%s: %s is not one of the machines %v", b.where(), w, b.args)
			}
			return fmt.Sprintf("127.0.0.%d", k)
		})
		env := append(slices.Clone(s.env), "NOMICORE_LISTEN="+addr+":8787", "NOMICORE_ADMIN_LISTEN="+addr+":8788",
			"NOMICORE_CLIENT_LISTEN="+addr+":8789")
		cmd, _ := s.start(name, root, text, env)
		cmds = append(cmds, cmd)
	}
	// A machine's block runs its server in the foreground: it must still run after a while.
	time.Sleep(3 * time.Second)
	for i, cmd := range cmds {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			s.t.Fatalf("%s: the block on %s ended at once", b.where(), b.args[i])
		}
	}
}

// ---------- what each walkthrough must have achieved ----------

// docChecks are the checks after a walkthrough ran, by its key (file#heading).
var docChecks = map[string]func(t *testing.T, s *docSandbox){
	"README.md#Five-minute walkthrough": func(t *testing.T, s *docSandbox) {
		ns := s.needVar("NS")
		for _, admin := range []string{"127.0.0.1:8788", "127.0.0.1:8790", "127.0.0.1:8792"} {
			docHas(t, admin, ns, "hello from peer-a")
		}
		for _, admin := range []string{"127.0.0.1:8790", "127.0.0.1:8792"} {
			docGet(t, "http://"+admin+"/v1/targets", `"state":"live"`)
		}
		// The editor pages the walkthrough printed open (the editor's token in the address).
		urls := regexp.MustCompile(`http://127\.0\.0\.1:879[13]/edit/ns-[0-9a-f]{32}\?token=[A-Za-z0-9_-]+`).FindAllString(s.out, -1)
		if len(urls) != 2 {
			t.Fatalf("the walkthrough printed %d editor addresses, want 2:\n%s", len(urls), s.out)
		}
		for _, u := range urls {
			docGet(t, u, "Nomicore editor")
		}
		// The rich-text pages it printed, in a real browser: what is typed on one peer's
		// page shows on the other's with its caret, both say "saved", and both peers hold it.
		rich := regexp.MustCompile(`http://127\.0\.0\.1:879[13]/edit/rich/ns-[0-9a-f]{32}\?token=[A-Za-z0-9_-]+`).FindAllString(s.out, -1)
		if len(rich) != 2 {
			t.Fatalf("the walkthrough printed %d rich-text editor addresses, want 2:\n%s", len(rich), s.out)
		}
		browser := browserFor(t)
		pa, pb := newRichTab(t, browser, "peer-a"), newRichTab(t, browser, "peer-b")
		screenshotsOnFailure(t, map[string]context.Context{pa.name: pa.tab, pb.name: pb.tab})
		pa.open(rich[0])
		pb.open(rich[1])
		want := richConverge(t, pa, pb, "Typed on the page of peer-a.", " And on the page of peer-b.")
		// Each page shows the other's caret, relayed through the hub between its peers.
		for _, p := range []*richPage{pa, pb} {
			p.waitFor("the caret of the editor on the other peer", richCarets, func(s string) bool { return s != "" })
		}
		for _, admin := range []string{"127.0.0.1:8790", "127.0.0.1:8792"} {
			docGet(t, "http://"+admin+"/v1/namespaces/"+ns+"/doc?root=default:xml", want)
		}
		if !strings.Contains(s.out, `nomicore_connections_ready{side="hub"} 2`) {
			t.Errorf("the metrics the walkthrough printed do not show two peers connected:\n%s", s.out)
		}
	},
	"docs/editors.md#Trying it on one machine": func(t *testing.T, s *docSandbox) {
		tok := regexp.MustCompile(`"token":"([A-Za-z0-9_-]{43})"`).FindStringSubmatch(s.out)
		if tok == nil {
			t.Fatalf("POST /v1/clients printed no token:\n%s", s.out)
		}
		for _, want := range []string{`"tokenSha256Prefix"`, `"check":"unknown-token"`, `"removed":1`, `"sub":"alice"`} {
			if !strings.Contains(s.out, want) {
				t.Errorf("the walkthrough's answers lack %s:\n%s", want, s.out)
			}
		}
		if strings.Count(s.out, tok[1]) != 1 {
			t.Errorf("the token shows more than once (only POST /v1/clients may show it):\n%s", s.out)
		}
	},
	"docs/operations.md#A restore drill on one machine": func(t *testing.T, s *docSandbox) {
		ns, token := s.needVar("NS"), s.needVar("NOMICORE_ADMIN_TOKEN")
		doc := func(admin string) string {
			req, _ := http.NewRequest("GET", "http://"+admin+"/v1/namespaces/"+ns+"/doc", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", req.URL, resp.StatusCode, b)
			}
			return string(b)
		}
		// The drill's hub holds the namespace as the backup took it; the real one goes on.
		if got := doc("127.0.0.1:8798"); !strings.Contains(got, "before-the-backup") || strings.Contains(got, "after-the-backup") {
			t.Errorf("the restored hub's document: %s", got)
		}
		if got := doc("127.0.0.1:8788"); !strings.Contains(got, "after-the-backup") {
			t.Errorf("the running hub's document: %s", got)
		}
		for _, want := range []string{"checked, written to nomicore-data/hub.backup", "restored nomicore-data/hub.backup into nomicore-data/drill: 1 namespaces",
			"refused (exit status 1)"} {
			if !strings.Contains(s.out, want) {
				t.Errorf("the walkthrough's output lacks %q:\n%s", want, s.out)
			}
		}
		if _, err := os.Stat(filepath.Join(s.dir, "nomicore-data", "not-restored", "nomicore.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused restore wrote a store: %v", err)
		}
	},
	"docs/cluster.md#Starting three nodes on one machine": func(t *testing.T, s *docSandbox) {
		ns := s.needVar("NS")
		for i := 1; i <= 3; i++ {
			docGet(t, fmt.Sprintf("http://127.0.0.1:879%d/readyz", i), `"ready":true`)
			docGet(t, fmt.Sprintf("http://127.0.0.1:880%d/healthz", i), "") // every node serves its editors
			docHas(t, fmt.Sprintf("127.0.0.1:879%d", i), ns, "hello")
		}
		docGet(t, "http://127.0.0.1:8810/v1/targets", `"state":"live"`)
		docHas(t, "127.0.0.1:8810", ns, "hello")
	},
	"docs/cluster.md#Starting three nodes on three machines": func(t *testing.T, s *docSandbox) {
		for i := 1; i <= 3; i++ {
			docGet(t, fmt.Sprintf("http://127.0.0.%d:8788/readyz", i), `"ready":true`)
		}
		// One cluster: a namespace made on h1, written through h2, read on h3.
		resp, err := http.Post("http://127.0.0.1:8788/v1/namespaces", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ns := regexp.MustCompile(`ns-[0-9a-f]{32}`).FindString(string(body))
		if resp.StatusCode != http.StatusCreated || ns == "" {
			t.Fatalf("creating a namespace on h1: %d %s", resp.StatusCode, body)
		}
		out, err := exec.Command(filepath.Join(s.dir, "bin", "hub"), "write", "--admin-url", "http://127.0.0.2:8788", "--namespace", ns, "written=on h2").CombinedOutput()
		if err != nil {
			t.Fatalf("hub write through h2: %v\n%s", err, out)
		}
		docHas(t, "127.0.0.3:8788", ns, "on h2")
	},
}

func (s *docSandbox) needVar(name string) string {
	v := s.vars[name]
	if v == "" {
		s.t.Fatalf("the walkthrough did not set %s", name)
	}
	return v
}

// docGet polls url until it answers 200 with a body containing want.
func docGet(t *testing.T, url, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "GET "+url, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			return fmt.Errorf("%d %.300s", resp.StatusCode, b)
		}
		return nil
	})
}

// docHas waits until the namespace's document on the admin API at admin contains want.
func docHas(t *testing.T, admin, ns, want string) {
	t.Helper()
	docGet(t, "http://"+admin+"/v1/namespaces/"+ns+"/doc", want)
}
