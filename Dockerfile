# delayq server image: `docker build -t delayq .`
#
# Runs `delayq serve` as uid 10001 with the embedded store in the volume /var/lib/delayq, or
# on Redis with DELAYQ_REDIS. Configure it with DELAYQ_* variables (docs/CONFIG.md) or mount
# a settings file and pass `--config /etc/delayq/delayq.toml`; secrets as files
# (DELAYQ_TOKEN_FILE=/run/secrets/delayq_tokens). It listens on 0.0.0.0:7070, which needs a
# token: the server refuses to start without one. Compose: deploy/compose.yaml. How this
# image is tested without a container runtime: docs/DEPLOY.md.

FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
ARG DELAYQ_GIT_COMMIT=unknown
ENV DELAYQ_GIT_COMMIT=${DELAYQ_GIT_COMMIT}
RUN cargo build --release --locked -p delayq-cli && strip target/release/delayq

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 delayq \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/delayq \
      --shell /usr/sbin/nologin delayq \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/delayq \
 && install -d -m 0755 /etc/delayq
COPY --from=build /src/target/release/delayq /usr/bin/delayq
USER 10001:10001
WORKDIR /var/lib/delayq
ENV DELAYQ_DATA=/var/lib/delayq \
    DELAYQ_LISTEN=0.0.0.0:7070
VOLUME /var/lib/delayq
EXPOSE 7070
# `delayq health` asks /readyz of the server in this container (no curl in the image).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/bin/delayq", "health"]
# SIGTERM drains: requests finish, long polls answer, the pusher's requests in flight end.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/delayq"]
CMD ["serve"]
