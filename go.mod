module github.com/nomicore/nomicore

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.etcd.io/bbolt v1.4.3 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
