package node

import (
	"errors"

	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/yws"
)

// registerClientLimitFlags adds the flags of the editors' limits (yws.Limits): what one
// user and one connection may take of the node. Going over one closes the connection with
// 1008; the provider reconnects and resends what was not applied.
func registerClientLimitFlags(f *cli.Flags, l *yws.Limits) {
	f.IntVar(&l.ConnectionsPerUser, "max-connections-per-user", yws.DefaultConnectionsPerUser,
		"open editor connections of one user (a client token's name: an application that gives one token to many people raises this or gives each a token); the next one is closed with 1008")
	f.IntVar(&l.MessagesPerSecond, "client-messages-per-second", yws.DefaultMessagesPerSecond,
		"messages one editor connection may send per second, on average over 5s; beyond, it is closed with 1008")
	f.IntVar(&l.BytesPerSecond, "client-bytes-per-second", yws.DefaultBytesPerSecond,
		"bytes one editor connection may send per second, on average over 5s (one message of --max-chunked-update-bytes always passes); beyond, it is closed with 1008")
	f.IntVar(&l.AwarenessUpdatesPerSecond, "awareness-updates-per-second", yws.DefaultAwarenessUpdatesPerSecond,
		"presence (awareness) updates one editor connection may send per second, on average over 5s; beyond, it is closed with 1008")
	f.IntVar(&l.AwarenessStatesPerConnection, "max-awareness-states-per-connection", yws.DefaultAwarenessStatesPerConnection,
		"presence states one editor connection may hold (its own, and those of its browser's other tabs it repeats); more are dropped")
}

// registerHocuspocusBoundFlags adds the flags of the bounds of one Hocuspocus socket
// (yws.HocuspocusOptions): the documents it opens, and what its documents whose
// authentication has not completed hold.
func registerHocuspocusBoundFlags(f *cli.Flags, o *yws.HocuspocusOptions) {
	f.IntVar(&o.MaxDocuments, "hocuspocus-documents-per-socket", yws.DefaultMaxDocumentsPerSocket,
		"documents one Hocuspocus socket may open; a further one is refused (PermissionDenied)")
	f.IntVar(&o.HeldBytes, "hocuspocus-held-bytes", yws.DefaultHeldBytes,
		"bytes of the messages one Hocuspocus socket sends for documents still authenticating, held until they are; beyond, the socket is closed with 4205")
	f.IntVar(&o.HeldMessages, "hocuspocus-held-messages", yws.DefaultHeldMessages,
		"messages one Hocuspocus socket sends for documents still authenticating, held until they are; beyond, the socket is closed with 4205")
	f.IntVar(&o.PendingDocuments, "hocuspocus-pending-documents", yws.DefaultPendingDocuments,
		"documents of one Hocuspocus socket still authenticating (or refused, until their next token); beyond, the socket is closed with 4205")
}

// checkHocuspocusBounds refuses bounds that are not positive.
func checkHocuspocusBounds(o yws.HocuspocusOptions) error {
	if o.MaxDocuments <= 0 || o.HeldBytes <= 0 || o.HeldMessages <= 0 || o.PendingDocuments <= 0 {
		return errors.New("--hocuspocus-documents-per-socket, --hocuspocus-held-bytes, --hocuspocus-held-messages and --hocuspocus-pending-documents must be positive")
	}
	return nil
}

// checkClientLimits refuses limits that are not positive.
func checkClientLimits(l yws.Limits) error {
	if l.ConnectionsPerUser <= 0 || l.MessagesPerSecond <= 0 || l.BytesPerSecond <= 0 || l.AwarenessUpdatesPerSecond <= 0 ||
		l.AwarenessStatesPerConnection <= 0 {
		return errors.New("--max-connections-per-user, --client-messages-per-second, --client-bytes-per-second, --awareness-updates-per-second and --max-awareness-states-per-connection must be positive")
	}
	return nil
}
