module github.com/leader-sidecar/leader-sidecar/pkg/fence

go 1.22
