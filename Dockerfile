# syntax=docker/dockerfile:1
# Build: docker build -t jethook .
# Run:   docker run -p 8080:8080 -v jethook-data:/data jethook
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
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/jethook"]
CMD ["serve"]
