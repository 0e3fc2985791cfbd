# The idemgateway container image: a static binary on distroless, as a non-root user, fit for a
# read-only root filesystem.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t idemgateway .
#   docker run --rm -p 8080:8080 -v "$PWD/routes.yaml:/etc/idemgateway/routes.yaml:ro" \
#     -v idemgateway-data:/var/lib/idemgateway --read-only idemgateway
#
# `make image-binary` builds and checks the same binary without a Docker engine; keep the go build
# line below and the Makefile's in step (the target checks that they are).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/idemgateway ./cmd/idemgateway
# The data directory, owned by the image's non-root user (65532), for the embedded store.
RUN mkdir -p /out/data

# static-debian12 holds CA certificates (/etc/ssl/certs), tzdata and /etc/passwd; :nonroot runs as
# uid/gid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/idemgateway /usr/local/bin/idemgateway
COPY --from=build --chown=65532:65532 /out/data /var/lib/idemgateway
ENV IDEMGATEWAY_ROUTES=/etc/idemgateway/routes.yaml \
    IDEMGATEWAY_DATA_DIR=/var/lib/idemgateway \
    IDEMGATEWAY_LISTEN=:8080 \
    IDEMGATEWAY_ADMIN_LISTEN=127.0.0.1:9090
# The admin listener stays on the container's loopback unless you set IDEMGATEWAY_ADMIN_LISTEN=:9090,
# which the process accepts only together with IDEMGATEWAY_ADMIN_TOKEN (the records API's bearer
# token; /healthz, /readyz and /metrics need none).
EXPOSE 8080 9090
# The embedded store's file (idemgateway.db). With Redis settings it stays empty.
VOLUME ["/var/lib/idemgateway"]
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/idemgateway"]
CMD ["serve"]
