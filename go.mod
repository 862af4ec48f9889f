module github.com/leader-sidecar/leader-sidecar

go 1.26.0

require go.uber.org/goleak v1.3.0
