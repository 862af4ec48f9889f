module github.com/leader-sidecar/leader-sidecar

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)
