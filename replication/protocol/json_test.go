package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestS7_FrameJSONRoundTrip(t *testing.T) {
	for i, s := range samples() {
		f := Frame{Sequence: uint32(i + 1), Message: s.msg}
		text := AppendFrameJSON(nil, f)
		if !json.Valid(text) {
			t.Fatalf("%s: invalid JSON %s", s.name, text)
		}
		back, err := ParseFrameJSON(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.name, err, text)
		}
		if !reflect.DeepEqual(back, f) {
			t.Fatalf("%s: %s read back as %#v", s.name, text, back.Message)
		}
	}
}

// TestS7_FrameJSONShape: docs/protocol.md#json-form names, order, hex bytes, omitted
// optionals, numbers for bitsets and enums, JSON bools.
func TestS7_FrameJSONShape(t *testing.T) {
	cases := []struct {
		f    Frame
		want string
	}{
		{Frame{3, &GoAway{ReasonCode: "R", DrainTimeoutMs: 1}},
			`{"type":"GOAWAY","sequence":3,"payload":{"reasonCode":"R","drainTimeoutMs":1}}`},
		{Frame{4, &ErrorMessage{Scope: ScopeNamespace, Code: CodeAckTimeout, Retryable: true, NamespaceID: nsA, SafeMessage: "a\"b"}},
			`{"type":"ERROR","sequence":4,"payload":{"scope":1,"code":"ACK_TIMEOUT","fatal":false,"retryable":true,"namespaceId":"ns-0123456789abcdef0123456789abcdef","safeMessage":"a\"b"}}`},
		{Frame{5, &Hello{PeerInstanceID: "p", ExpectedHubInstanceID: "h", ProtocolVersions: []uint64{2, 1}, OptionalCapabilities: 1, ConnectionNonce: nonce}},
			`{"type":"HELLO","sequence":5,"payload":{"peerInstanceId":"p","expectedHubInstanceId":"h","protocolVersions":[2,1],"requiredCapabilities":0,"optionalCapabilities":1,"connectionNonce":"000102030405060708090a0b0c0d0e0f"}}`},
		{Frame{6, &UpdateChunk{Kind: KindSyncDiff, NamespaceID: nsA, TransferID: 1, ChunkCount: 2, TotalBytes: 3, SyncRoundID: 9, Bytes: []byte{0xAB}}},
			`{"type":"UPDATE_CHUNK","sequence":6,"payload":{"kind":2,"namespaceId":"ns-0123456789abcdef0123456789abcdef","transferId":1,"chunkIndex":0,"chunkCount":2,"totalBytes":3,"syncRoundId":9,"bytes":"ab"}}`},
		{Frame{7, &Update{NamespaceID: nsA, Update: []byte{}}},
			`{"type":"UPDATE","sequence":7,"payload":{"namespaceId":"ns-0123456789abcdef0123456789abcdef","update":""}}`},
		{Frame{8, &HelloAck{HubInstanceID: "h", ProtocolVersion: 1, ConnectionNonce: nonce, ConnectionID: "tab\tnl\n\x01é"}},
			`{"type":"HELLO_ACK","sequence":8,"payload":{"hubInstanceId":"h","protocolVersion":1,"selectedCapabilities":0,"connectionNonce":"000102030405060708090a0b0c0d0e0f","connectionId":"tab\tnl\n\u0001é"}}`},
	}
	for _, c := range cases {
		if got := string(AppendFrameJSON(nil, c.f)); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestS7_FrameJSONRejects(t *testing.T) {
	const ns = `"ns-0123456789abcdef0123456789abcdef"`
	for _, text := range []string{
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `}}`,                                                                                 // missing field
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":1,"extra":1}}`,                                                     // unknown field
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":1.5}}`,                                                             // fraction
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":1e3}}`,                                                             // exponent
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":-1}}`,                                                              // negative
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":4294967296}}`,                                                      // over uint32
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":"1"}}`,                                                             // string
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":"ns-1","ackedSequence":1}}`,                                                                   // bad namespace
		`{"type":"UPDATE","sequence":1,"payload":{"namespaceId":` + ns + `,"update":"abc"}}`,                                                                      // odd hex
		`{"type":"UPDATE","sequence":1,"payload":{"namespaceId":` + ns + `,"update":null}}`,                                                                       // null
		`{"type":"GOAWAY","sequence":1,"payload":{"reasonCode":"R","drainTimeoutMs":9007199254740992}}`,                                                           // over 2^53-1
		`{"type":"OPEN_NAMESPACE","sequence":1,"payload":{"namespaceId":` + ns + `,"hasLocalReplica":true}}`,                                                      // identity missing
		`{"type":"OPEN_NAMESPACE","sequence":1,"payload":{"namespaceId":` + ns + `,"hasLocalReplica":"true"}}`,                                                    // string bool
		`{"type":"HELLO_ACK","sequence":1,"payload":{"hubInstanceId":"h","protocolVersion":1,"selectedCapabilities":0,"connectionNonce":"00","connectionId":""}}`, // nonce length
		`{"type":"NOPE","sequence":1,"payload":{}}`,
		`{"type":"UPDATE_ACK","sequence":0.5,"payload":{}}`,
		`{"type":"UPDATE_ACK","payload":{}}`,
		`{"type":"UPDATE_ACK","sequence":1,"payload":[]}`,
		`{"type":"UPDATE_ACK","sequence":1,"payload":{},"more":1}`,
		`{"type":"UPDATE_ACK","sequence":1,"payload":{"namespaceId":` + ns + `,"ackedSequence":1}} {}`,
		`not json`,
	} {
		if _, err := ParseFrameJSON([]byte(text)); codeOf(err) != CodeMalformedFrame {
			t.Errorf("accepted %s (%v)", text, err)
		}
	}
}
