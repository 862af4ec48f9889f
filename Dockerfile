# syntax=docker/dockerfile:1
# leader-sidecar: a static binary on a distroless, non-root base.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags --always) -t leader-sidecar .
#
# e2e/image_test.go builds the binary with the go build line below and runs
# it in an empty root filesystem as uid 65532, so a change here that makes
# the binary need more than the final stage has fails the tests.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=devel
WORKDIR /src
COPY go.mod go.sum ./
COPY pkg/fence/go.mod ./pkg/fence/
RUN go mod download
COPY cmd ./cmd
COPY pkg ./pkg
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sidecar ./cmd/sidecar

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sidecar /sidecar
USER 65532:65532
EXPOSE 4040 8081
ENTRYPOINT ["/sidecar"]
