# graphflat's image: the release build, then a slim runtime with the binary alone.
#   docker build -t graphflat:latest --build-arg GRAPHFLAT_COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker run --rm graphflat:latest --help
# deploy/kubernetes/graphflat.yaml runs it as an indexed Job.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The commit `graphflat --version` and the job reports name (.git is not copied in).
ARG GRAPHFLAT_COMMIT=unknown
ENV GRAPHFLAT_COMMIT=${GRAPHFLAT_COMMIT}
RUN cargo build --release --locked --bin graphflat

FROM debian:bookworm-slim
# CA certificates: S3 over HTTPS.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 graphflat
COPY --from=build /src/target/release/graphflat /usr/local/bin/graphflat
USER graphflat
ENTRYPOINT ["graphflat"]
CMD ["--help"]
