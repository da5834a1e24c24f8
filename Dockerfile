# syntax=docker/dockerfile:1
# Build: docker build -t jethook .
# Run:   docker run -p 8080:8080 -v jethook-data:/data jethook
# The shipped policies.yaml delivers to http://127.0.0.1:3000, which in a
# container is the container itself. Point it at an app on the host with
#   docker run -p 8080:8080 -v jethook-data:/data \
#     --add-host=host.docker.internal:host-gateway \
#     -e EXAMPLE_APP_URL=http://host.docker.internal:3000 jethook
# or mount your own: -v $PWD/policies.yaml:/etc/jethook/policies.yaml:ro
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/jethook . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/jethook /usr/local/bin/jethook
COPY --from=build /src/policies.yaml /etc/jethook/policies.yaml
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV JETHOOK_CONFIG=/etc/jethook/policies.yaml \
    JETHOOK_DATA_DIR=/data \
    JETHOOK_LISTEN=:8080
VOLUME /data
EXPOSE 8080
# Numeric (distroless's nonroot is 65532), so Kubernetes' runAsNonRoot can
# check it without a runAsUser.
USER 65532:65532
# No shell or curl in the image: jethook asks its own admin listener, which
# stays on loopback (docs/scale.md: Running in a container).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/jethook", "probe", "ready"]
ENTRYPOINT ["/usr/local/bin/jethook"]
CMD ["serve"]
