package protocol

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nomicore/nomicore/lib0"
)

// Limits are the size limits a Codec enforces. Config.Limits derives
// them from a validated configuration.
type Limits struct {
	MaxFrameBytes     int // a whole WebSocket message, envelope included (FRAME_TOO_LARGE)
	MaxUpdateBytes    int // UPDATE.update and UPDATE_CHUNK.bytes (UPDATE_TOO_LARGE)
	MaxSyncDiffBytes  int // SYNC_STEP2.update (SYNC_DIFF_TOO_LARGE)
	MaxBootstrapBytes int // BOOTSTRAP_SNAPSHOT.snapshot (BOOTSTRAP_TOO_LARGE)
}

// Frame is one decoded frame: the envelope's sequence and the typed message.
type Frame struct {
	Sequence uint32
	Message  Message
}

// Type returns the frame's message type.
func (f Frame) Type() MessageType { return f.Message.Type() }

// Codec encodes and decodes single frames under fixed limits and the negotiated
// capabilities. It is a small immutable value, safe to copy and to use from any goroutine; the
// sequence state of a connection lives in Inbound and Outbound.
//
// Buffer lifetimes: a decoded message's byte fields (Update.Update, UpdateChunk.Bytes,
// SyncStep2.Update, SyncStep1.StateVector, BootstrapSnapshot.Snapshot) alias the input
// message, which must therefore not be modified or reused while the message is in use. A
// WebSocket library that returns a fresh slice per message (coder/websocket's Conn.Read)
// satisfies this with no copy; a caller that reuses a read buffer must copy first. Strings are
// always copied.
type Codec struct {
	lim  Limits
	caps Capability
}

// NewCodec returns a codec with the given limits and negotiated capabilities (0 before the
// handshake completes).
func NewCodec(lim Limits, negotiated Capability) Codec { return Codec{lim: lim, caps: negotiated} }

// WithCapabilities returns a copy of c with the negotiated capabilities replaced.
func (c Codec) WithCapabilities(negotiated Capability) Codec {
	c.caps = negotiated
	return c
}

// Capabilities returns the negotiated capabilities the codec enforces.
func (c Codec) Capabilities() Capability { return c.caps }

// Limits returns the codec's limits.
func (c Codec) Limits() Limits { return c.lim }

// ParseHeader runs the envelope checks on one WebSocket message and returns its envelope.
func (c Codec) ParseHeader(msg []byte) (Header, error) {
	h, err := parseHeader(msg, c.lim.MaxFrameBytes, c.caps)
	if err != nil {
		return h, err
	}
	return h, nil
}

// Decode decodes one WebSocket message into a frame, running the decoding checks in order
// (docs/protocol.md#frame-checks) except the sequence, which needs the per-direction state
// of Inbound. It never panics, and every failure is an *Error with its registry code.
// Nothing is allocated before checks 1–8 pass; an UPDATE frame then costs one allocation
// (the message) and no copy of its bytes, which alias msg (see Codec for the lifetime rule).
func (c Codec) Decode(msg []byte) (Frame, error) {
	h, herr := parseHeader(msg, c.lim.MaxFrameBytes, c.caps)
	if herr != nil {
		return Frame{}, herr
	}
	m, err := c.decodePayload(h, msg[HeaderLen:])
	if err != nil {
		return Frame{}, err
	}
	return Frame{Sequence: h.Sequence, Message: m}, nil
}

// decodePayload is the last check: the whole payload by the lib0 grammar
// (docs/protocol.md#binary-form), then the field rules (docs/protocol.md#field-rules), then
// the namespace-scope size caps.
func (c Codec) decodePayload(h Header, payload []byte) (Message, *Error) {
	var r reader
	r.Reset(payload)
	var m Message
	switch h.Type { // UPDATE, UPDATE_ACK, UPDATE_CHUNK and HELLO are also written out by hand (fields.go)
	case TypeUpdate:
		u := new(Update)
		u.decodeFast(&r)
		m = u
	case TypeUpdateAck:
		a := new(UpdateAck)
		a.decodeFast(&r)
		m = a
	case TypeHello:
		hello := new(Hello)
		hello.decodeFast(&r)
		m = hello
	case TypeUpdateChunk:
		c := new(UpdateChunk)
		c.decodeFast(&r)
		m = c
	default:
		m = messageRules[h.Type].new() // parseHeader let only registered types through
		decodeFields(m, &r)
	}
	if err := r.Finish(); err != nil {
		detail := h.Type.String() + "." + r.field
		if errors.Is(err, lib0.ErrTrailing) {
			detail = h.Type.String() + ": trailing bytes after the last field"
		}
		e := connErr(CodeMalformedFrame, detail).withHeader(h)
		e.Err = err
		return nil, e
	}
	if e := m.check(c.lim); e != nil {
		return nil, e.withHeader(h)
	}
	return m, nil
}

// AppendFrame appends the frame for m with sequence seq to dst and returns the extended
// slice; it appends nothing on error. The message must satisfy every rule the decoder applies
// (an *Error with the code a receiver would answer, for example UPDATE_TOO_LARGE for an update
// the caller must chunk), UPDATE_CHUNK needs CAP_CHUNKED_UPDATE negotiated, and the frame must
// fit maxFrameBytes.
func (c Codec) AppendFrame(dst []byte, seq uint32, m Message) ([]byte, error) {
	if m == nil {
		return dst, connErr(CodeInternalError, "AppendFrame: nil message")
	}
	t := m.Type()
	h := Header{Type: t, Sequence: seq}
	if req := t.requires(); !c.caps.Has(req) {
		return dst, connErr(CodeUnsupportedMessageType, t.String()+" without negotiated "+req.String()).withHeader(h)
	}
	if e := m.check(c.lim); e != nil {
		return dst, e.withHeader(h)
	}
	start := len(dst)
	switch m := m.(type) { // UPDATE, UPDATE_ACK, UPDATE_CHUNK and HELLO are also written out by hand (fields.go)
	case *Update:
		dst = m.appendFast(appendHeader(slices.Grow(dst, HeaderLen+m.sizeFast()), t, seq))
	case *UpdateAck:
		dst = m.appendFast(appendHeader(slices.Grow(dst, HeaderLen+m.sizeFast()), t, seq))
	case *Hello:
		dst = m.appendFast(appendHeader(slices.Grow(dst, HeaderLen+m.sizeFast()), t, seq))
	case *UpdateChunk:
		dst = m.appendFast(appendHeader(slices.Grow(dst, HeaderLen+m.sizeFast()), t, seq))
	default:
		dst = appendPayload(appendHeader(slices.Grow(dst, HeaderLen+sizeHint(m)), t, seq), m)
	}
	n := len(dst) - start
	if n > c.lim.MaxFrameBytes {
		return dst[:start], connErr(CodeFrameTooLarge, fmt.Sprintf("frame of %d bytes over maxFrameBytes %d", n, c.lim.MaxFrameBytes)).withHeader(h)
	}
	setPayloadLength(dst[start:], uint32(n-HeaderLen))
	return dst, nil
}
