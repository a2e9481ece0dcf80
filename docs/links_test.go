// Package docs holds the project's documents; its test keeps their cross-references honest.
// Code comments cite the documents by path and heading anchor (for example
// docs/protocol.md#chunked-transfers), and the documents link to each other the same way: a
// renamed heading must not leave a citation pointing nowhere.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// docRef is a document named in Go source: a path ending in .md and, optionally, an anchor.
// An anchor starts with a lowercase letter or digit, which leaves out the test names that
// cite a heading by its text ("docs/cluster.md#Starting three nodes…").
var docRef = regexp.MustCompile(`([A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.md)(?:#([a-z0-9][a-z0-9_-]*))?`)

// mdLink is a Markdown link target: [text](target); external is one with a scheme.
var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	external = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// heading is a Markdown heading line; linkText a link inside one, reduced to its text.
var (
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// TestGoCitationsResolve: every document a .go file names exists, and every anchor it cites
// is a heading of that document.
func TestGoCitationsResolve(t *testing.T) {
	a := newAnchors()
	checked := 0
	walk(t, func(path string) {
		if !strings.HasSuffix(path, ".go") {
			return
		}
		for n, line := range readLines(t, path) {
			if !strings.Contains(line, ".md") {
				continue
			}
			for _, m := range docRef.FindAllStringSubmatch(line, -1) {
				file, anchor := m[1], m[2]
				target, ok := resolve(path, file)
				if !ok {
					t.Errorf("%s:%d: %s does not exist", rel(path), n+1, file)
					continue
				}
				checked++
				if anchor != "" && !a.has(t, target, anchor) {
					t.Errorf("%s:%d: %s has no heading with the anchor #%s", rel(path), n+1, rel(target), anchor)
				}
			}
		}
	})
	if checked == 0 {
		t.Fatal("no document citation found in any .go file: the walk or the pattern is broken")
	}
}

// TestNoSectionSignsInCode: production code cites docs/protocol.md, never the section numbers
// of a contract that is not in this repository.
func TestNoSectionSignsInCode(t *testing.T) {
	files := 0
	walk(t, func(path string) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return
		}
		files++
		for n, line := range readLines(t, path) {
			if strings.Contains(line, "§") {
				t.Errorf("%s:%d: cites a section number (§); cite a heading of docs/protocol.md instead: %s",
					rel(path), n+1, strings.TrimSpace(line))
			}
		}
	})
	if files == 0 {
		t.Fatal("no .go file found")
	}
}

// TestMarkdownLinksResolve: every relative link of the project's Markdown documents names a
// file that exists and, with an anchor, one of its headings.
func TestMarkdownLinksResolve(t *testing.T) {
	a := newAnchors()
	docs := 0
	walk(t, func(path string) {
		if !strings.HasSuffix(path, ".md") {
			return
		}
		docs++
		fence := false
		for n, line := range readLines(t, path) {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				link := m[1]
				if external.MatchString(link) {
					continue // http:, https:, mailto:
				}
				file, anchor, _ := strings.Cut(link, "#")
				target := path
				if file != "" {
					target = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link (%s): %s does not exist", rel(path), n+1, link, rel(target))
					continue
				}
				if anchor != "" && strings.HasSuffix(target, ".md") && !a.has(t, target, anchor) {
					t.Errorf("%s:%d: link (%s): %s has no heading with the anchor #%s", rel(path), n+1, link, rel(target), anchor)
				}
			}
		}
	})
	if docs == 0 {
		t.Fatal("no Markdown document found")
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Chunked transfers":                                  "chunked-transfers",
		"HELLO_ACK":                                          "hello_ack",
		"`nmcr doc`: inspection":                             "nmcr-doc-inspection",
		"replication/protocol":                               "replicationprotocol",
		"Large documents (the v2 generation)":                "large-documents-the-v2-generation",
		"reconnection: backoff, admission control, failover": "reconnection-backoff-admission-control-failover",
		"A [link](#elsewhere) in a heading":                  "a-link-in-a-heading",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// anchors caches the heading anchors of each document.
type anchors map[string]map[string]bool

func newAnchors() anchors { return anchors{} }

func (a anchors) has(t *testing.T, path, anchor string) bool {
	set, ok := a[path]
	if !ok {
		set = headingAnchors(readLines(t, path))
		a[path] = set
	}
	return set[anchor]
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown document: the
// slug of each heading outside code fences, and for a repeated slug the slug followed by -1,
// -2, … in order.
func headingAnchors(lines []string) map[string]bool {
	out, seen, fence := map[string]bool{}, map[string]int{}, false
	for _, line := range lines {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if k := seen[s]; k > 0 {
			out[s+"-"+strconv.Itoa(k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor for a heading: link syntax reduced to its text, lower case,
// everything but letters, digits, '_', '-' and spaces removed, spaces turned into '-'.
func slug(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// resolve finds the document a file at path names: relative to the repository root, to the
// file's own directory, or for a bare file name, in docs/.
func resolve(path, file string) (string, bool) {
	for _, p := range []string{filepath.Join(root, file), filepath.Join(filepath.Dir(path), file), filepath.Join(root, "docs", file)} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// walk calls f for every file of the repository, leaving out hidden directories and the
// JavaScript packages npm installs.
func walk(t *testing.T, f func(path string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		f(path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// rel is path relative to the repository root, for messages.
func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
