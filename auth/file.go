package auth

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// File is the content of a tokens file: the peers' replication tokens (the hub's) and the
// editors' client tokens (either binary's client listener).
type File struct {
	Peers   []PeerEntry
	Clients []ClientEntry
}

// ParseFile decodes a tokens file (docs/operations.md#tokens-and-rotation):
//
//	{"peers":[{"instanceId":"peer-a","tokenSha256":"<64 hex>","owner":"default",
//	           "namespaces":["*"],"read":true,"submit":true}],
//	 "clients":[{"name":"alice","tokenSha256":"<64 hex>","namespaces":["*"],"readOnly":false,
//	             "expiresAt":"2030-01-02T15:04:05Z"}]}
//
// A client's expiresAt is optional (absent: the token does not expire). Either list may be absent. Unknown fields are refused, so a misspelt key is not silently
// ignored.
func ParseFile(data []byte) (File, error) {
	var f struct {
		Peers   []filePeer   `json:"peers"`
		Clients []fileClient `json:"clients"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("tokens file: %w", err)
	}
	out := File{Peers: make([]PeerEntry, 0, len(f.Peers))}
	for i, p := range f.Peers {
		h, err := ParseTokenSHA256(p.TokenSHA256)
		if err != nil {
			return File{}, fmt.Errorf("tokens file entry %d: %w", i, err)
		}
		out.Peers = append(out.Peers, PeerEntry{PeerInstanceID: p.InstanceID, TokenSHA256: h, Owner: p.Owner,
			Namespaces: p.Namespaces, Read: p.Read, Submit: p.Submit})
	}
	for i, c := range f.Clients {
		h, err := ParseTokenSHA256(c.TokenSHA256)
		if err != nil {
			return File{}, fmt.Errorf("tokens file client entry %d: %w", i, err)
		}
		e := ClientEntry{Name: c.Name, TokenSHA256: h, Namespaces: c.Namespaces, ReadOnly: c.ReadOnly}
		if c.ExpiresAt != "" {
			if e.ExpiresAt, err = time.Parse(time.RFC3339, c.ExpiresAt); err != nil {
				return File{}, fmt.Errorf("tokens file client entry %d: expiresAt %q: want a time like 2030-01-02T15:04:05Z", i, c.ExpiresAt)
			}
		}
		out.Clients = append(out.Clients, e)
	}
	return out, nil
}

// filePeer is one peer entry of the tokens file.
type filePeer struct {
	InstanceID  string   `json:"instanceId"`
	TokenSHA256 string   `json:"tokenSha256"`
	Owner       string   `json:"owner"`
	Namespaces  []string `json:"namespaces"`
	Read        bool     `json:"read"`
	Submit      bool     `json:"submit"`
}

// fileClient is one client entry of the tokens file.
type fileClient struct {
	Name        string   `json:"name"`
	TokenSHA256 string   `json:"tokenSha256"`
	Namespaces  []string `json:"namespaces"`
	ReadOnly    bool     `json:"readOnly"`
	ExpiresAt   string   `json:"expiresAt,omitempty"` // RFC 3339; absent: never
}

// EncodeFile renders f in the tokens file format that ParseFile reads, one entry per line;
// the clients list is written only when there are clients.
func EncodeFile(f File) []byte {
	var b bytes.Buffer
	b.WriteString("{\"peers\":[")
	for i, e := range f.Peers {
		if i > 0 {
			b.WriteByte(',')
		}
		line, _ := json.Marshal(filePeer{e.PeerInstanceID, hex.EncodeToString(e.TokenSHA256[:]), e.Owner,
			orEmpty(e.Namespaces), e.Read, e.Submit})
		b.WriteString("\n  ")
		b.Write(line)
	}
	if len(f.Peers) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]")
	if len(f.Clients) > 0 {
		b.WriteString(",\n\"clients\":[")
		for i, c := range f.Clients {
			if i > 0 {
				b.WriteByte(',')
			}
			fc := fileClient{Name: c.Name, TokenSHA256: hex.EncodeToString(c.TokenSHA256[:]), Namespaces: orEmpty(c.Namespaces), ReadOnly: c.ReadOnly}
			if !c.ExpiresAt.IsZero() {
				fc.ExpiresAt = c.ExpiresAt.UTC().Format(time.RFC3339)
			}
			line, _ := json.Marshal(fc)
			b.WriteString("\n  ")
			b.Write(line)
		}
		b.WriteString("\n]")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
