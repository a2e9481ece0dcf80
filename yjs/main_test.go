package yjs

import (
	"os"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
)

func TestMain(m *testing.M) { os.Exit(oracle.Run(m)) }
