package protocol

import (
	"fmt"
	"slices"
	"testing"
)

// TestS6_VersionNegotiationMatrix runs the handshake for every combination of hub and peer
// version sets and required/optional capabilities (including a bit neither side knows) and
// compares it with the rule of docs/protocol.md#hello spelled out by enumeration: the highest
// version in both sets; every required bit supported by the other side; the selection is the
// intersection.
func TestS6_VersionNegotiationMatrix(t *testing.T) {
	const unknownBit Capability = 0x8000_0000
	versionSets := [][]uint64{{1}, {2, 1}, {3, 2}, {2}, {5, 4}, {16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}}
	capSets := []Capability{0, CapChunkedUpdate, unknownBit, CapChunkedUpdate | unknownBit}
	runs := 0
	for _, hubVersions := range versionSets {
		for _, peerVersions := range versionSets {
			for _, hubCaps := range capSets {
				for _, hubReq := range capSets {
					for _, peerOpt := range capSets {
						for _, peerReq := range capSets {
							runs++
							hub := HubHandshake{HubInstanceID: "hub", PeerInstanceID: "peer-a", ConnectionID: "c1",
								Offer: Offer{Versions: hubVersions, Capabilities: hubCaps, Required: hubReq}}
							peer := PeerHandshake{PeerInstanceID: "peer-a", HubInstanceID: "hub", Nonce: nonce,
								Offer: Offer{Versions: peerVersions, Capabilities: peerOpt, Required: peerReq}}
							name := fmt.Sprintf("hub %v caps %v req %v / peer %v caps %v req %v", hubVersions, hubCaps, hubReq, peerVersions, peerOpt, peerReq)

							wantVersion := uint64(0)
							for v := uint64(16); v >= 1 && wantVersion == 0; v-- {
								if slices.Contains(hubVersions, v) && slices.Contains(peerVersions, v) {
									wantVersion = v
								}
							}
							hubHas, peerHas := hubCaps|hubReq, peerOpt|peerReq
							wantCode := ErrorCode("")
							switch {
							case wantVersion == 0:
								wantCode = CodeUnsupportedProtocolVersion
							case peerReq&^hubHas != 0 || hubReq&^peerHas != 0:
								wantCode = CodeUnsupportedCapability
							}
							var want Capability
							for bit := Capability(1); bit != 0; bit <<= 1 {
								if hubHas.Has(bit) && peerHas.Has(bit) {
									want |= bit
								}
							}

							hello := peer.Hello()
							if _, err := chunkedCodec().AppendFrame(nil, 1, hello); err != nil {
								t.Fatalf("%s: HELLO invalid: %v", name, err)
							}
							ack, n, err := hub.Answer(hello)
							if codeOf(err) != wantCode {
								t.Fatalf("%s: %v, want %q", name, err, wantCode)
							}
							if wantCode != "" {
								continue
							}
							if n.ProtocolVersion != wantVersion || n.Capabilities != want {
								t.Fatalf("%s: negotiated %+v, want v%d %v", name, n, wantVersion, want)
							}
							pn, err := peer.CheckAck(ack)
							if err != nil || pn != n {
								t.Fatalf("%s: peer sees %+v, %v", name, pn, err)
							}
						}
					}
				}
			}
		}
	}
	if runs != 6*6*4*4*4*4 {
		t.Fatalf("%d combinations", runs)
	}
}

// TestS22_GenerationInteropMatrix: v1 and v2 generations in both roles; only v2 ↔ v2
// negotiates CAP_CHUNKED_UPDATE, and the protocol version is 1 in every pairing
// (docs/protocol.md#terms-and-invariants: the generation never changes envelope or protocol
// versions).
func TestS22_GenerationInteropMatrix(t *testing.T) {
	gens := []Generation{GenerationV1, GenerationV2}
	for _, hg := range gens {
		for _, pg := range gens {
			hc, pc := DefaultConfig(), DefaultConfig()
			hc.Generation, pc.Generation = hg, pg
			hub := HubHandshake{HubInstanceID: "hub", PeerInstanceID: "peer-a", Offer: hc.Offer()}
			peer := PeerHandshake{PeerInstanceID: "peer-a", HubInstanceID: "hub", Nonce: nonce, Offer: pc.Offer()}
			hello := peer.Hello()
			if pg == GenerationV1 && hello.OptionalCapabilities != 0 {
				t.Fatal("v1 HELLO offers capabilities")
			}
			ack, n, err := hub.Answer(hello)
			if err != nil {
				t.Fatal(err)
			}
			pn, err := peer.CheckAck(ack)
			if err != nil || pn != n || n.ProtocolVersion != 1 {
				t.Fatalf("hub %v / peer %v: %+v %+v %v", hg, pg, n, pn, err)
			}
			if n.Chunked() != (hg == GenerationV2 && pg == GenerationV2) {
				t.Fatalf("hub %v / peer %v: chunked %v", hg, pg, n.Chunked())
			}
			// The negotiated codecs agree on 0x42.
			chunk := &UpdateChunk{Kind: KindLiveUpdate, NamespaceID: nsA, TransferID: 1, ChunkCount: 1, TotalBytes: 1, Bytes: []byte{1}}
			_, errEnc := NewCodec(hc.Limits(), n.Capabilities).AppendFrame(nil, 1, chunk)
			if (errEnc == nil) != n.Chunked() {
				t.Fatalf("hub %v / peer %v: encoding 0x42: %v", hg, pg, errEnc)
			}
		}
	}
}

func TestS2_HandshakeIdentityAndNonce(t *testing.T) {
	cfg := DefaultConfig()
	hub := HubHandshake{HubInstanceID: "hub", PeerInstanceID: "peer-a", Offer: cfg.Offer()}
	peer := PeerHandshake{PeerInstanceID: "peer-a", HubInstanceID: "hub", Nonce: nonce, Offer: cfg.Offer()}

	h := peer.Hello()
	h.PeerInstanceID = "peer-b" // self-declared identity differs from the Upgrade identity
	if _, _, err := hub.Answer(h); codeOf(err) != CodeInstanceIdentityMismatch {
		t.Fatalf("peer id: %v", err)
	}
	h = peer.Hello()
	h.ExpectedHubInstanceID = "other-hub"
	if _, _, err := hub.Answer(h); codeOf(err) != CodeInstanceIdentityMismatch {
		t.Fatalf("hub id: %v", err)
	}
	ack, _, err := hub.Answer(peer.Hello())
	if err != nil || ack.ConnectionNonce != nonce {
		t.Fatalf("nonce not echoed: %v", err)
	}
	for _, c := range []struct {
		mut  func(a *HelloAck)
		want ErrorCode
	}{
		{func(a *HelloAck) { a.HubInstanceID = "imposter" }, CodeInstanceIdentityMismatch},
		{func(a *HelloAck) { a.ConnectionNonce[0] ^= 1 }, CodeConnectionPolicyViolation},
		{func(a *HelloAck) { a.ProtocolVersion = 2 }, CodeUnsupportedProtocolVersion},
		{func(a *HelloAck) { a.SelectedCapabilities |= 0x10 }, CodeUnsupportedCapability},
	} {
		a := *ack
		c.mut(&a)
		if _, err := peer.CheckAck(&a); codeOf(err) != c.want {
			t.Errorf("%v, want %s", err, c.want)
		}
	}
	// A peer that requires a capability refuses an ack that lacks it.
	strict := peer
	strict.Offer.Required = CapChunkedUpdate
	a := *ack
	a.SelectedCapabilities = 0
	if _, err := strict.CheckAck(&a); codeOf(err) != CodeUnsupportedCapability {
		t.Fatalf("required capability missing: %v", err)
	}
	// A v2 peer receiving a v1 hub's ack (nothing selected) is fine: optional only.
	if n, err := peer.CheckAck(&a); err != nil || n.Chunked() {
		t.Fatalf("v1 hub ack: %+v %v", n, err)
	}
}
