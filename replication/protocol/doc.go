// Package protocol is the NMCR replication protocol v1 codec: the 20-byte envelope (§3), the
// 18 typed messages (§5–§13), the error registries (§13, §14), version and capability
// negotiation (§6), the configuration with its start-up constraints (§17, §18), and chunked
// transfers (§10.3, §8.1, §9.2). It carries Yjs bytes opaquely and imports only lib0.
//
// # Decoding
//
// One WebSocket binary message is one frame. Inbound decodes a connection's receiving
// direction, running the checks of GUIDE §5 in order: maxFrameBytes, envelope length, magic,
// envelope version, flags, reserved, message type (0x42 only with CAP_CHUNKED_UPDATE), declared
// length, sequence, payload. Nothing is allocated for the payload before the envelope checks
// pass. Every failure is an *Error carrying its registry code and scope: connection-scope
// errors close the connection; namespace-scope errors (UPDATE_TOO_LARGE, SYNC_DIFF_TOO_LARGE,
// BOOTSTRAP_TOO_LARGE, and the transfer codes of the Assembler) carry the namespaceId and fail
// only that namespace. Codec.Decode is the stateless form, without the sequence check.
//
// Buffer lifetimes: byte fields of a decoded message alias the input message (an UPDATE
// decodes with one allocation and no copy). The input must not be modified or reused while
// the message is in use.
//
// # Encoding
//
// Outbound appends frames with the next sequence of the sending direction. The encoder applies
// the same field rules as the decoder, so it cannot produce a frame the receiver would refuse;
// ERROR frames take scope, fatal and retryable from the registry (NewErrorMessage).
//
// # Ownership
//
// Codec is an immutable value. Inbound, Outbound, Assembler and TransferIDs are plain state,
// not goroutines and not safe for concurrent use: the connection's owner goroutine calls them.
// The Assembler reads time only from an injected Clock.
package protocol
