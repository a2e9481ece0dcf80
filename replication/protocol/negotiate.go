package protocol

import (
	"fmt"
	"slices"
)

// Offer is what one side brings to the version and capability handshake.
type Offer struct {
	Versions     []uint64   // protocol versions spoken, strictly descending
	Capabilities Capability // capabilities supported (offered as optional)
	Required     Capability // capabilities without which this side refuses the connection
}

// Negotiated is the outcome of a successful handshake: what both directions of the
// connection use from then on (Inbound.SetCapabilities, Outbound.SetCapabilities).
type Negotiated struct {
	ProtocolVersion uint64
	Capabilities    Capability
}

// Chunked reports whether UPDATE_CHUNK may be used on the connection.
func (n Negotiated) Chunked() bool { return n.Capabilities.Has(CapChunkedUpdate) }

// NamespaceDeleted reports whether the connection selected CapNamespaceDeleted: the hub
// may send NAMESPACE_DELETED.
func (n Negotiated) NamespaceDeleted() bool { return n.Capabilities.Has(CapNamespaceDeleted) }

// Presence reports whether PRESENCE (the presence extension) may be used on the connection.
func (n Negotiated) Presence() bool { return n.Capabilities.Has(CapPresence) }

// HubHandshake answers a peer's HELLO (docs/protocol.md#handshake).
type HubHandshake struct {
	HubInstanceID string // this hub
	// PeerInstanceID is the identity authenticated at the HTTP Upgrade; the HELLO's
	// self-declared id must equal it and is never trusted on its own.
	PeerInstanceID string
	ConnectionID   string // for observability only
	Offer          Offer
}

// Answer checks a HELLO and returns the HELLO_ACK to send, or a connection-scope *Error to
// answer with (then close). The checks, in order: the peer's id equals the Upgrade identity
// and the expected hub id equals ours (INSTANCE_IDENTITY_MISMATCH); some protocol version is
// common, and the highest one is selected (UNSUPPORTED_PROTOCOL_VERSION); every capability
// either side requires is supported by the other (UNSUPPORTED_CAPABILITY). The selected
// capabilities are the intersection of what both offer.
func (hs *HubHandshake) Answer(h *Hello) (*HelloAck, Negotiated, error) {
	if h.PeerInstanceID != hs.PeerInstanceID {
		return nil, Negotiated{}, connErr(CodeInstanceIdentityMismatch, "HELLO peerInstanceId differs from the authenticated identity")
	}
	if h.ExpectedHubInstanceID != hs.HubInstanceID {
		return nil, Negotiated{}, connErr(CodeInstanceIdentityMismatch, "HELLO expectedHubInstanceId differs from this hub")
	}
	// The hub selects the highest protocol version both sides speak.
	version, ok := uint64(0), false
	for _, v := range h.ProtocolVersions {
		if slices.Contains(hs.Offer.Versions, v) && v > version {
			version, ok = v, true
		}
	}
	if !ok {
		return nil, Negotiated{}, connErr(CodeUnsupportedProtocolVersion, fmt.Sprintf("no common version in %v and %v", h.ProtocolVersions, hs.Offer.Versions))
	}
	// A required capability the other side lacks refuses the connection; the optional
	// capabilities in use are the intersection of both offers.
	ours := hs.Offer.Capabilities | hs.Offer.Required
	theirs := h.RequiredCapabilities | h.OptionalCapabilities
	if missing := h.RequiredCapabilities &^ ours; missing != 0 {
		return nil, Negotiated{}, connErr(CodeUnsupportedCapability, "peer requires "+missing.String())
	}
	if missing := hs.Offer.Required &^ theirs; missing != 0 {
		return nil, Negotiated{}, connErr(CodeUnsupportedCapability, "hub requires "+missing.String())
	}
	n := Negotiated{ProtocolVersion: version, Capabilities: theirs & ours}
	ack := &HelloAck{
		HubInstanceID:        hs.HubInstanceID,
		ProtocolVersion:      n.ProtocolVersion,
		SelectedCapabilities: n.Capabilities,
		ConnectionNonce:      h.ConnectionNonce,
		ConnectionID:         hs.ConnectionID,
	}
	return ack, n, nil
}

// PeerHandshake is the peer's side of the handshake (docs/protocol.md#handshake).
type PeerHandshake struct {
	PeerInstanceID string   // this peer
	HubInstanceID  string   // the hub it expects
	Nonce          [16]byte // fresh random bytes from the injected random source
	Offer          Offer
}

// Hello returns the HELLO to send first.
func (p *PeerHandshake) Hello() *Hello {
	return &Hello{
		PeerInstanceID:        p.PeerInstanceID,
		ExpectedHubInstanceID: p.HubInstanceID,
		ProtocolVersions:      slices.Clone(p.Offer.Versions),
		RequiredCapabilities:  p.Offer.Required,
		OptionalCapabilities:  p.Offer.Capabilities &^ p.Offer.Required,
		ConnectionNonce:       p.Nonce,
	}
}

// CheckAck validates the hub's HELLO_ACK against what Hello sent and returns the negotiated
// result, or a connection-scope *Error. The checks, in order: the hub id is the expected one
// (INSTANCE_IDENTITY_MISMATCH); the nonce is echoed (CONNECTION_POLICY_VIOLATION); the version
// is one we offered (UNSUPPORTED_PROTOCOL_VERSION); the selected capabilities are a subset of
// what we offered and include all we require (UNSUPPORTED_CAPABILITY).
func (p *PeerHandshake) CheckAck(a *HelloAck) (Negotiated, error) {
	if a.HubInstanceID != p.HubInstanceID {
		return Negotiated{}, connErr(CodeInstanceIdentityMismatch, "HELLO_ACK hubInstanceId differs from the expected hub")
	}
	if a.ConnectionNonce != p.Nonce {
		return Negotiated{}, connErr(CodeConnectionPolicyViolation, "HELLO_ACK connectionNonce does not echo HELLO's")
	}
	if !slices.Contains(p.Offer.Versions, a.ProtocolVersion) {
		return Negotiated{}, connErr(CodeUnsupportedProtocolVersion, fmt.Sprintf("HELLO_ACK selected version %d, not offered", a.ProtocolVersion))
	}
	offered := p.Offer.Capabilities | p.Offer.Required
	if extra := a.SelectedCapabilities &^ offered; extra != 0 {
		return Negotiated{}, connErr(CodeUnsupportedCapability, "HELLO_ACK selected unoffered "+extra.String())
	}
	if missing := p.Offer.Required &^ a.SelectedCapabilities; missing != 0 {
		return Negotiated{}, connErr(CodeUnsupportedCapability, "HELLO_ACK lacks required "+missing.String())
	}
	return Negotiated{ProtocolVersion: a.ProtocolVersion, Capabilities: a.SelectedCapabilities}, nil
}
