package tokens

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/nomicore/nomicore/replication/ws"
)

// ParseFile decodes a tokens file (GUIDE §7):
//
//	{"peers":[{"instanceId":"peer-a","tokenSha256":"<64 hex>","owner":"default",
//	           "namespaces":["*"],"read":true,"submit":true}]}
//
// Unknown fields are refused, so a misspelt key is not silently ignored.
func ParseFile(data []byte) ([]ws.TokenEntry, error) {
	var f struct {
		Peers []filePeer `json:"peers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	out := make([]ws.TokenEntry, 0, len(f.Peers))
	for i, p := range f.Peers {
		h, err := ws.ParseTokenSHA256(p.TokenSHA256)
		if err != nil {
			return nil, fmt.Errorf("tokens file entry %d: %w", i, err)
		}
		out = append(out, ws.TokenEntry{PeerInstanceID: p.InstanceID, TokenSHA256: h, Owner: p.Owner,
			Namespaces: p.Namespaces, Read: p.Read, Submit: p.Submit})
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

// EncodeFile renders entries in the tokens file format that ParseFile reads, one peer per
// line.
func EncodeFile(entries []ws.TokenEntry) []byte {
	var b bytes.Buffer
	b.WriteString("{\"peers\":[")
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		namespaces := e.Namespaces
		if namespaces == nil {
			namespaces = []string{}
		}
		line, _ := json.Marshal(filePeer{e.PeerInstanceID, hex.EncodeToString(e.TokenSHA256[:]), e.Owner,
			namespaces, e.Read, e.Submit})
		b.WriteString("\n  ")
		b.Write(line)
	}
	if len(entries) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes()
}
