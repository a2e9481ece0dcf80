package persistence_test

import (
	"context"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

func openMemory(t *testing.T, opts persistence.Options) persistence.Store {
	st, err := persistence.NewMemoryStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st.Close(ctx)
	})
	return st
}

func TestMemoryStoreConformance(t *testing.T) {
	persistencetest.Run(t, openMemory)
}

func TestMemoryStoreFeedConformance(t *testing.T) {
	persistencetest.RunFeed(t, openMemory)
}
