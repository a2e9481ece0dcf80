package auth

import (
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/nomicore/nomicore/replication/protocol"
)

// fuzzEncode writes entries in the tokens file format as the documentation gives it
// (package comment), independently of the package's own encoder.
func fuzzEncode(entries []PeerEntry) []byte {
	type peer struct {
		InstanceID  string   `json:"instanceId"`
		TokenSHA256 string   `json:"tokenSha256"`
		Owner       string   `json:"owner"`
		Namespaces  []string `json:"namespaces"`
		Read        bool     `json:"read"`
		Submit      bool     `json:"submit"`
	}
	f := struct {
		Peers []peer `json:"peers"`
	}{Peers: []peer{}}
	for _, e := range entries {
		f.Peers = append(f.Peers, peer{e.PeerInstanceID, hex.EncodeToString(e.TokenSHA256[:]), e.Owner, e.Namespaces, e.Read, e.Submit})
	}
	b, _ := json.Marshal(f)
	return b
}

// FuzzParse feeds the tokens file parser arbitrary bytes. It must not panic, must answer the
// same twice, and must accept only files the hub can serve: every peer instance id valid,
// every namespace "*" or a namespace id. An accepted file written again in the documented
// format parses to the same entries; and the revocations between it and a reference table
// name only peers of the table they were taken from.
func FuzzParse(f *testing.F) {
	const ns = "ns-0123456789abcdef0123456789abcdef"
	hash := "4ba7e2ecb1e3bd4e6bb96c6a5d4d2a6da6c6b9e8f4b2d3c1a0e9f8d7c6b5a493"
	for _, s := range []string{
		``, ` `, `{}`, `{"peers":[]}`, `{"peers":null}`, `[]`, `null`, `{"peers":{}}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","owner":"default","namespaces":["*"],"read":true,"submit":true}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","owner":"o","namespaces":["` + ns + `"],"read":true,"submit":false},
		           {"instanceId":"peer-b","tokenSha256":"` + hash + `","owner":"o","namespaces":[],"read":false,"submit":false}]}`,
		`{"peers":[{"instanceId":"Peer","tokenSha256":"` + hash + `","owner":"o","namespaces":["*"],"read":true,"submit":true}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"00","owner":"o","namespaces":["*"]}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","namespaces":["ns-1"]}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","extra":1}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `"}]} trailing`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash[:63] + `Z"}]}`,
		`{"peers":[{"instanceId":"\u0000","tokenSha256":"` + hash + `"}]}`,
		`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","namespaces":["*","*"],"owner":"\ud800"}]}`,
		`{"peers":[{"instanceId":1}]}`, `{"peers":[[[[[[[[[[[[[]]]]]]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	ref, err := Parse([]byte(`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + hash + `","owner":"default","namespaces":["*"],"read":true,"submit":true},` +
		`{"instanceId":"peer-b","tokenSha256":"` + hash + `","owner":"default","namespaces":["` + ns + `"],"read":true,"submit":true}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		again, err2 := Parse(data)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(entries, again) {
			t.Fatalf("two parses differ: %v / %v", err, err2)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without words")
			}
			return
		}
		for i, e := range entries {
			if !protocol.ValidInstanceID(e.PeerInstanceID) {
				t.Fatalf("entry %d: instance id %q accepted", i, e.PeerInstanceID)
			}
			for _, n := range e.Namespaces {
				if _, err := protocol.ParseNamespaceID(n); n != AllNamespaces && err != nil {
					t.Fatalf("entry %d: namespace %q accepted", i, n)
				}
			}
		}
		round, err := Parse(fuzzEncode(entries))
		if err != nil {
			t.Fatalf("the accepted file written again does not parse: %v", err)
		}
		norm := func(es []PeerEntry) []PeerEntry {
			if len(es) == 0 {
				return nil
			}
			out := slices.Clone(es)
			for i := range out {
				if len(out[i].Namespaces) == 0 {
					out[i].Namespaces = nil
				}
			}
			return out
		}
		if !reflect.DeepEqual(norm(round), norm(entries)) {
			t.Fatalf("round trip changed the entries:\n%+v\n%+v", entries, round)
		}
		for _, pair := range [][2][]PeerEntry{{ref, entries}, {entries, ref}} {
			for _, r := range Revocations(pair[0], pair[1], []string{ns}) {
				if !slices.ContainsFunc(pair[0], func(e PeerEntry) bool { return e.PeerInstanceID == r.PeerInstanceID }) {
					t.Fatalf("a revocation names %q, not a peer of the old table", r.PeerInstanceID)
				}
			}
		}
	})
}
