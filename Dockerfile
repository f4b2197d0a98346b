# newsdedup service image: `docker build -t newsdedup .`, or through docker-compose.yml.
FROM python:3.11-slim-trixie

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies get a layer of their own, keyed only on the lock, so editing the source does
# not reinstall them; only the files whose hashes the lock lists are accepted.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock

COPY pyproject.toml README.md ./
COPY consumer ./consumer
COPY indexstore ./indexstore
# The native kernels (consumer/native/, indexstore/native/) are Rust: cargo is installed for
# the build and removed in the same layer, so the image does not carry the toolchain. Debian
# trixie's cargo is Rust 1.85, the oldest the kernels' dependencies accept. pip treats the
# kernels as optional (README, "Installing elsewhere"), so the import makes a kernel that did
# not build fail the image instead of shipping the slower Python fallback; -P keeps /app's
# source tree, which has no kernels, off the import path.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends cargo \
    && pip install --no-cache-dir --no-deps . \
    && python -P -c "import consumer._fastfp, indexstore._probe" \
    && apt-get purge -y --auto-remove cargo \
    && rm -rf /var/lib/apt/lists/* /root/.cargo /app/build /app/*.egg-info /app/consumer/native/target \
        /app/indexstore/native/target

COPY config/newsdedup.toml /etc/newsdedup/newsdedup.toml

# A fixed numeric uid/gid lets operators chown a host directory for the index without guessing.
RUN groupadd --system --gid 10001 newsdedup \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/newsdedup newsdedup \
    && mkdir -p /var/lib/newsdedup \
    && chown 10001:10001 /var/lib/newsdedup \
    && chmod 0700 /var/lib/newsdedup
USER 10001:10001
VOLUME ["/var/lib/newsdedup"]
# The default config's relative ./state would land in /app, which the service user cannot write.
ENV NEWSDEDUP_INDEX_PATH=/var/lib/newsdedup
# Derived tables (consumer/fingerprint/tablecache.py) out of the index volume, which is also $HOME.
ENV XDG_CACHE_HOME=/tmp/cache

EXPOSE 9108
ENTRYPOINT ["newsdedup"]
CMD ["run", "--config", "/etc/newsdedup/newsdedup.toml"]
