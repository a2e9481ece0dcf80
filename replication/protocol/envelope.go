package protocol

import (
	"encoding/binary"
	"fmt"
)

// HeaderLen is the size of the fixed envelope.
const HeaderLen = 20

// EnvelopeVersion is the only envelope layout. It is independent of the protocol
// version negotiated in HELLO.
const EnvelopeVersion = 1

// magic is ASCII "NMCR".
var magic = [4]byte{'N', 'M', 'C', 'R'}

// Header is the envelope of one frame (docs/protocol.md#envelope): all integers big-endian,
// flags and reserved zero.
//
//	offset 0  magic "NMCR" | 4 version | 5 messageType | 6 flags (2) | 8 sequence (4)
//	offset 12 payloadLength (4) | 16 reserved (4)
type Header struct {
	Type          MessageType
	Sequence      uint32
	PayloadLength uint32
}

// parseHeader runs the envelope checks in their order (steps 1–8 of
// docs/protocol.md#frame-checks) on one WebSocket message. It reads only the 20 header bytes
// and allocates nothing unless it fails.
func parseHeader(msg []byte, maxFrameBytes int, caps Capability) (Header, *Error) {
	var h Header
	// 1. The outer frame limit, before anything else is read.
	if len(msg) > maxFrameBytes {
		return h, connErr(CodeFrameTooLarge, fmt.Sprintf("message of %d bytes over maxFrameBytes %d", len(msg), maxFrameBytes))
	}
	// 2. The fixed header is exactly 20 bytes.
	if len(msg) < HeaderLen {
		return h, connErr(CodeMalformedFrame, fmt.Sprintf("message of %d bytes is shorter than the %d-byte envelope", len(msg), HeaderLen))
	}
	// 3. magic "NMCR".
	if [4]byte(msg[0:4]) != magic {
		return h, connErr(CodeBadMagic, fmt.Sprintf("magic %x", msg[0:4]))
	}
	// 4. envelopeVersion 1.
	if msg[4] != EnvelopeVersion {
		return h, connErr(CodeUnsupportedEnvelopeVersion, fmt.Sprintf("envelope version %d", msg[4]))
	}
	// 5. Flags must be 0.
	if flags := binary.BigEndian.Uint16(msg[6:8]); flags != 0 {
		return h, connErr(CodeUnsupportedFlags, fmt.Sprintf("flags 0x%04x", flags))
	}
	// 6. Reserved must be 0.
	if reserved := binary.BigEndian.Uint32(msg[16:20]); reserved != 0 {
		return h, connErr(CodeMalformedFrame, fmt.Sprintf("reserved 0x%08x", reserved))
	}
	h.Type = MessageType(msg[5])
	h.Sequence = binary.BigEndian.Uint32(msg[8:12])
	h.PayloadLength = binary.BigEndian.Uint32(msg[12:16])
	// 7. An unknown type is connection fatal; so is a type whose capability was not
	// negotiated (UPDATE_CHUNK without CAP_CHUNKED_UPDATE), before the payload is parsed.
	if !h.Type.Known() {
		return h, connErr(CodeUnsupportedMessageType, "unknown message type").withHeader(h)
	}
	if req := h.Type.requires(); !caps.Has(req) {
		return h, connErr(CodeUnsupportedMessageType, h.Type.String()+" without negotiated "+req.String()).withHeader(h)
	}
	// 8. The message is exactly 20 + payloadLength bytes, after the frame limit.
	if total := HeaderLen + uint64(h.PayloadLength); total > uint64(maxFrameBytes) {
		return h, connErr(CodeFrameTooLarge, fmt.Sprintf("declared frame of %d bytes over maxFrameBytes %d", total, maxFrameBytes)).withHeader(h)
	} else if total != uint64(len(msg)) {
		return h, connErr(CodeFrameLengthMismatch, fmt.Sprintf("declared frame of %d bytes in a message of %d", total, len(msg))).withHeader(h)
	}
	return h, nil
}

// appendHeader appends an envelope with a zero payload length; setPayloadLength fills it in.
func appendHeader(dst []byte, t MessageType, seq uint32) []byte {
	dst = append(dst, magic[:]...)
	dst = append(dst, EnvelopeVersion, byte(t), 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	return binary.BigEndian.AppendUint32(dst, 0)
}

func setPayloadLength(frame []byte, n uint32) { binary.BigEndian.PutUint32(frame[12:16], n) }

// FrameSequence returns the sequence in the envelope of an encoded frame (at least HeaderLen
// bytes, as AppendFrame produces them).
func FrameSequence(frame []byte) uint32 { return binary.BigEndian.Uint32(frame[8:12]) }

// SetFrameSequence stamps seq into the envelope of an encoded frame (at least HeaderLen
// bytes), in place: a frame encoded ahead of time takes the sequence its writer assigns
// when it is sent.
func SetFrameSequence(frame []byte, seq uint32) { binary.BigEndian.PutUint32(frame[8:12], seq) }
