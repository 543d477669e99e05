# pilot-discovery's image: a static binary on a distroless, non-root base.
# (Not built in CI: this machine has no container engine.)
FROM golang:1.26 AS build
# Go 1.27 (Gateway API v1.7.0 needs it), fetched from the module proxy.
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-X github.com/infermesh/infermesh/pkg/version.Version=${VERSION}" \
    -o /out/pilot-discovery ./pilot/cmd/pilot-discovery

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pilot-discovery /usr/local/bin/pilot-discovery
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pilot-discovery"]
