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

// checkClientLimits refuses limits that are not positive.
func checkClientLimits(l yws.Limits) error {
	if l.ConnectionsPerUser <= 0 || l.MessagesPerSecond <= 0 || l.BytesPerSecond <= 0 || l.AwarenessUpdatesPerSecond <= 0 ||
		l.AwarenessStatesPerConnection <= 0 {
		return errors.New("--max-connections-per-user, --client-messages-per-second, --client-bytes-per-second, --awareness-updates-per-second and --max-awareness-states-per-connection must be positive")
	}
	return nil
}
