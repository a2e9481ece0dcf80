package yjs

import (
	"os"
	"testing"

	"github.com/nomicore/nomicore/internal/oracle"
)

func TestMain(m *testing.M) { os.Exit(oracle.Run(m)) }
