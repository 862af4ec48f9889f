// Package packaging holds the tests of what a release ships, built as the
// release builds it: the sidecar binary built as the Dockerfile builds it
// and run in an empty root as uid 65532; the multi-platform OCI images of
// hack/image.sh (make image), checked layer by layer and built twice to
// the same digests; and hack/release.sh (make release), every artifact it
// publishes (binaries, images, charts, SHA256SUMS) and the versions it
// refuses. The charts' own versions and images are checked in e2e/chart.
//
// What they need besides Go:
//
//   - helm, for TestRelease: $HELM, else the one hack/helm.sh builds from
//     the Go module proxy into ~/.cache on first use (a minute, once);
//   - git, for the release's tags;
//   - root, for TestImageBinaryRunsInAnEmptyRootAsNonRoot (chroot and uid
//     65532), which fails rather than skips without it.
//
// No API server. They build images and releases from scratch, minutes on
// two cores:
//
//	go test -count=1 -timeout 20m ./e2e/packaging/
//	go test -count=1 -run 'TestImageReproducible' ./e2e/packaging/
package packaging
