package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// defaultHubURL is --hub-url's default.
const defaultHubURL = "ws://127.0.0.1:8787/v1/replication"

// hubURLs is the repeatable --hub-url flag: the replication endpoints of one hub (the nodes
// of a cluster). A value may also be a comma-separated list, which is how NOMICORE_HUB_URL
// carries several. The command line replaces the environment rather than adding to it:
// the environment's list is applied first (envflag), so it is dropped when the command line
// gives the flag too.
type hubURLs struct {
	sets [][]string // one entry per Set call, in order
}

func (h *hubURLs) String() string {
	if h == nil || len(h.sets) == 0 {
		return defaultHubURL
	}
	return strings.Join(slices.Concat(h.sets...), ",")
}

func (h *hubURLs) Set(v string) error {
	var set []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			set = append(set, part)
		}
	}
	if len(set) == 0 {
		return fmt.Errorf("no URL in %q", v)
	}
	h.sets = append(h.sets, set)
	return nil
}

// list returns the endpoints in the order given, checked: ws:// or wss:// with a host, none
// twice. fromEnv tells that NOMICORE_HUB_URL was set (its list is the first Set).
func (h *hubURLs) list(fromEnv bool) ([]string, error) {
	sets := h.sets
	if fromEnv && len(sets) > 1 {
		sets = sets[1:] // the command line wins over the environment
	}
	urls := slices.Concat(sets...)
	if len(urls) == 0 {
		urls = []string{defaultHubURL}
	}
	for i, s := range urls {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return nil, fmt.Errorf("--hub-url %q: want ws://HOST:PORT/v1/replication or wss://…", s)
		}
		if slices.Contains(urls[:i], s) {
			return nil, fmt.Errorf("--hub-url %q is given twice", s)
		}
	}
	return urls, nil
}
