package protocol

import (
	"fmt"
	"math"
)

// SequenceChecker is the sequence check of one receiving direction
// (docs/protocol.md#sequence-numbers): sequences start at 1 and increase by exactly one per
// frame, and the receiver accepts only the one it expects. The zero value expects 1. Once
// 2^32−1 has been received, no further frame is acceptable: the sequence never wraps.
type SequenceChecker struct {
	received uint32 // the last sequence accepted; 0 before the first frame
	done     bool   // 2^32−1 was accepted
}

// Expected returns the next acceptable sequence, and false once none is left.
func (s *SequenceChecker) Expected() (uint32, bool) {
	if s.done {
		return 0, false
	}
	return s.received + 1, true
}

// Check accepts seq if it is the expected one, else returns a SEQUENCE_VIOLATION.
func (s *SequenceChecker) Check(seq uint32) error {
	want, ok := s.Expected()
	if !ok || seq != want {
		detail := fmt.Sprintf("sequence %d, expected %d", seq, want)
		if !ok {
			detail = fmt.Sprintf("sequence %d after 2^32-1", seq)
		}
		return connErr(CodeSequenceViolation, detail)
	}
	s.received = seq
	s.done = seq == math.MaxUint32
	return nil
}

// SequenceAllocator hands out the sequences of one sending direction: 1, 2, … 2^32−1. After
// that every call fails with OUTBOUND_SEQUENCE_EXHAUSTED (a local connection code
// without a wire frame); the connection must be closed and re-established.
type SequenceAllocator struct {
	sent uint32 // the last sequence handed out; 0 before the first
}

// Next returns the next sequence.
func (s *SequenceAllocator) Next() (uint32, error) {
	if s.sent == math.MaxUint32 {
		return 0, connErr(CodeOutboundSequenceExhausted, "all 2^32-1 sequences of this direction are used")
	}
	s.sent++
	return s.sent, nil
}

// Last returns the last sequence handed out, 0 before the first.
func (s *SequenceAllocator) Last() uint32 { return s.sent }

// Inbound decodes the frames of one connection's receiving direction: all ten frame checks
// in order (docs/protocol.md#frame-checks), the sequence included. After a
// connection-scope failure it is broken: every later call returns the same error, since the
// connection must close.
// Namespace-scope failures (the size caps) leave it usable.
//
// Inbound is not safe for concurrent use: one goroutine of the connection owns it.
type Inbound struct {
	codec Codec
	seq   SequenceChecker
	err   error
}

// NewInbound returns a receiving direction that starts at sequence 1.
func NewInbound(c Codec) *Inbound { return &Inbound{codec: c} }

// SetCapabilities installs the capabilities the handshake negotiated.
func (in *Inbound) SetCapabilities(negotiated Capability) {
	in.codec = in.codec.WithCapabilities(negotiated)
}

// Codec returns the codec in use.
func (in *Inbound) Codec() Codec { return in.codec }

// Decode checks and decodes the next WebSocket message of this direction. A frame that passes
// the sequence check consumes its sequence even if its payload then fails. Byte fields alias
// msg (see Codec).
func (in *Inbound) Decode(msg []byte) (Frame, error) {
	if in.err != nil {
		return Frame{}, in.err
	}
	h, herr := parseHeader(msg, in.codec.lim.MaxFrameBytes, in.codec.caps)
	if herr != nil {
		return Frame{}, in.fail(herr)
	}
	if err := in.seq.Check(h.Sequence); err != nil {
		return Frame{}, in.fail(err.(*Error).withHeader(h))
	}
	m, err := in.codec.decodePayload(h, msg[HeaderLen:])
	if err != nil {
		return Frame{}, in.fail(err)
	}
	return Frame{Sequence: h.Sequence, Message: m}, nil
}

func (in *Inbound) fail(e *Error) error {
	if e.Scope == ScopeConnection {
		in.err = e
	}
	return e
}

// Outbound encodes the frames of one connection's sending direction, stamping each with the
// next sequence. A message that fails to encode consumes no sequence.
//
// Outbound is not safe for concurrent use: one goroutine of the connection owns it.
type Outbound struct {
	codec Codec
	seq   SequenceAllocator
}

// NewOutbound returns a sending direction that starts at sequence 1.
func NewOutbound(c Codec) *Outbound { return &Outbound{codec: c} }

// SetCapabilities installs the capabilities the handshake negotiated.
func (out *Outbound) SetCapabilities(negotiated Capability) {
	out.codec = out.codec.WithCapabilities(negotiated)
}

// Codec returns the codec in use.
func (out *Outbound) Codec() Codec { return out.codec }

// AppendFrame appends m's frame with the next sequence to dst, returning the extended slice
// and the sequence used. On error it appends nothing and consumes no sequence.
func (out *Outbound) AppendFrame(dst []byte, m Message) ([]byte, uint32, error) {
	if out.seq.Last() == math.MaxUint32 {
		_, err := out.seq.Next()
		return dst, 0, err
	}
	seq := out.seq.Last() + 1
	dst, err := out.codec.AppendFrame(dst, seq, m)
	if err != nil {
		return dst, 0, err
	}
	out.seq.Next()
	return dst, seq, nil
}
