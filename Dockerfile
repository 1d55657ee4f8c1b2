# syntax=docker/dockerfile:1
#
# The sartor image: the one binary (TLS through rustls and ring, so no
# OpenSSL) on distroless, running as UID/GID 65532. See docs/operations.md.
#
#   docker build -t ghcr.io/sartor-dev/sartor:v0.1.0 .
#
# The cache mounts (BuildKit, Docker's default builder) keep the cargo registry
# and compiled dependencies between builds, so a change to sartor's own code
# rebuilds only its crates.

FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p sartor \
    && install -D -m 0755 target/release/sartor /out/sartor

# The same Debian release as the build stage, so the glibc the binary was
# linked against is the one it runs on.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="sartor" \
      org.opencontainers.image.description="Gatekeeper-style mutation for Kubernetes" \
      org.opencontainers.image.source="https://github.com/sartor-dev/sartor" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/sartor /usr/local/bin/sartor
USER 65532:65532
# webhook (TLS), metrics and probes (plain HTTP)
EXPOSE 8443 8888
ENTRYPOINT ["/usr/local/bin/sartor"]
