module github.com/nomicore/nomicore

go 1.26
