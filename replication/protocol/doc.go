// Package protocol is the wire format of replication between a hub and its peers
// (NMCR, "nomicore-replication-protocol-v1"): how frames are encoded and checked, and the
// rules every frame type follows. It carries Yjs bytes without looking into them and
// imports only lib0; the connection layer (package ws) and the namespace layer (package
// namespace) build on it.
//
// # Frames
//
// One WebSocket binary message is one frame: a 20-byte envelope — the magic "NMCR", an
// envelope version, the message type, the frame's sequence and its payload length — and a
// payload of lib0-encoded fields. There are 18 message types (Message; MessageType). Four
// concern the connection itself: HELLO and HELLO_ACK (the handshake, which checks both
// instance ids and agrees on a protocol version and capabilities), GOAWAY (a drain) and
// ERROR (which may also concern one namespace). The others each name the namespace — one
// Yjs document — they are about: opening and closing it, bootstrapping a replica from a
// snapshot, reconciling by state vectors, live updates, and chunked transfers (UPDATE_CHUNK,
// only with the CAP_CHUNKED_UPDATE capability).
//
// Each sending direction numbers its frames 1, 2, 3, … with no gaps and no wrap
// (SequenceAllocator, SequenceChecker); acknowledgements name the frame they acknowledge by
// its sequence.
//
// # The rules of each message type
//
// rules.go holds, for every message type, the row of the contract's message registry and
// the rules the two layers above apply to it (MessageRule): which side may send it, whether
// it belongs to the connection or to a namespace, which acknowledgement settles it,
// whether a draining connection still takes it, whether it waits in a namespace's data
// queue, whether it ends its namespace's lifecycle on the connection, and the error that
// answers it out of place. Chunk kinds have their own rows (KindRule). A new message type is
// described there, given a Go type in messages.go whose fields method lists its payload
// fields once, in wire order (the binary codec, the size hint and the frame JSON all walk
// that list; see fields.go, where walk needs a case for the type), and handled where the
// layers handle messages.
//
// # Decoding
//
// Inbound decodes a connection's receiving direction, running the checks in the order the
// implementation guide gives: maxFrameBytes, envelope length, magic, envelope version,
// flags, reserved, message type (and its capability), declared length, sequence, payload.
// Nothing is allocated for the payload before the envelope checks pass. Every failure is an
// *Error carrying its registry code and scope: a connection-scope error closes the
// connection; a namespace-scope error (a frame over a namespace size cap, or a broken
// chunked transfer) fails only that namespace. Codec.Decode is the stateless form, without
// the sequence check.
//
// Buffer lifetimes: byte fields of a decoded message alias the input message (an UPDATE
// decodes with one allocation and no copy). The input must not be modified or reused while
// the message is in use.
//
// # Encoding
//
// Outbound appends frames with the next sequence of the sending direction. The encoder
// applies the same field rules as the decoder, so it cannot produce a frame the receiver
// would refuse; ERROR frames take scope, fatal and retryable from the error registry
// (NewErrorMessage). FrameSequence and SetFrameSequence read and restamp the sequence of an
// encoded frame.
//
// # Errors and configuration
//
// The error registries (ConnectionErrors, NamespaceErrors) fix what each error code means:
// whether it is fatal, whether retrying can help, the close code of a connection error, the
// state a namespace error leaves. Config holds every limit and timeout, and refuses an
// inconsistent configuration at start-up (Validate).
//
// # Chunked transfers
//
// A payload too large for one frame travels as UPDATE_CHUNK frames: Splitter cuts it,
// lazily, as the chunks are sent; Assembler puts a connection's inbound transfers back
// together, checking every chunk before it allocates, and TransferIDs numbers a direction's
// transfers.
//
// # Ownership
//
// Codec is an immutable value. Inbound, Outbound, Assembler and TransferIDs are plain state,
// not goroutines and not safe for concurrent use: a connection's owner goroutine calls them.
// The Assembler reads time only from an injected Clock.
package protocol
