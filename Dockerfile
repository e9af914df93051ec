# syntax=docker/dockerfile:1

# Redrive image: one static binary on distroless, running as a non-root user.
#
#   docker build -t redrive .
#   docker run --rm -p 8080:8080 -e REDRIVE_KAFKA_BROKERS=... -e REDRIVE_DATABASE_URL=... redrive
#
# The Go version here follows go.mod's `go` line (major.minor); internal/deploytest
# fails when they drift apart.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/redrive ./cmd/redrive

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), tzdata;
# no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot

COPY --from=build /out/redrive /redrive
# The shipped policies; in Kubernetes a ConfigMap is mounted over this directory.
COPY policies/ /etc/redrive/policies/
ENV REDRIVE_POLICIES_DIR=/etc/redrive/policies

USER 65532:65532
# HTTP API, /metrics, /healthz and /readyz (REDRIVE_HTTP_ADDR, default :8080).
# No HEALTHCHECK in the image: Kubernetes probes /healthz and /readyz over HTTP, and
# Compose runs `redrive health` (there is no curl in distroless).
EXPOSE 8080
ENTRYPOINT ["/redrive"]
CMD ["serve"]
