# toolcage's container image (see README.md, "Deploy"). Two stages: the build on
# debian:bookworm, the runtime on debian:bookworm-slim with the shared libraries, the
# interpreters the example policy's tools run (python3, bash) and runsc for its gvisor tool.
#   docker build -t toolcage .        (podman build works the same)
# On a machine without an image registry, scripts/build-base-images makes the two bases.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      libmicrohttpd-dev libjansson-dev libseccomp-dev libsodium-dev libpcre2-dev libpq-dev \
      libcurl4-openssl-dev libssl-dev libarchive-dev liblzma-dev musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
      -DTOOLCAGE_WERROR=ON \
 && cmake --build /build -j"$(nproc)" --target toolcage toolcage-server toolcage-init toolcage-vminit toolcage-vmrun toolcage-launcher \
 && DESTDIR=/out cmake --install /build --strip

FROM debian:bookworm-slim
# Runtime libraries of toolcage, and what the tools of the example policy execute.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmicrohttpd12 libjansson4 libseccomp2 \
      libsodium23 libpcre2-8-0 libpq5 libcurl4 libssl3 libarchive13 liblzma5 ca-certificates python3 runsc \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 999 --user-group --home-dir /var/lib/toolcage --no-create-home \
      --shell /usr/sbin/nologin toolcage \
 && install -d -m 0755 /etc/toolcage /var/lib/toolcage \
 && install -d -m 0700 -o toolcage -g toolcage /var/lib/toolcage/keys
COPY --from=build /out/ /
RUN rm -rf /usr/lib/systemd \
 && cp /usr/share/toolcage/policy.json /etc/toolcage/policy.json \
 && toolcage policy check /etc/toolcage/policy.json
ENV TOOLCAGE_POLICY=/etc/toolcage/policy.json \
    TOOLCAGE_STATE_DIR=/var/lib/toolcage \
    TOOLCAGE_MASTER_KEY_FILE=/var/lib/toolcage/keys/master.key \
    TOOLCAGE_LISTEN=0.0.0.0:8080
EXPOSE 8080
# `serve` runs as root in the container: its launcher creates the sandboxes' namespaces,
# mounts and cgroups (README.md, "Deploy", lists the privileges it needs and why). Every
# other subcommand (migrate, keys, users, policy check) runs as the unprivileged user:
#   docker run --user toolcage ... toolcage migrate
# STOPSIGNAL: toolcage stops cleanly on SIGTERM (the default).
CMD ["toolcage", "serve"]
