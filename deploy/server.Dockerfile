# cordon-server: `cordon serve` in a container, built by `cordon images build server` from
# an in-memory context (no registry, no source tree):
#   rootfs/usr/local/bin/cordon          the running cordon binary
#   rootfs/usr/local/bin/sandbox-agent   the agent (for the local backend and image builds)
#   rootfs/usr/local/bin/setfacl         the host's, to grant a sandbox its workspace (no
#                                        user namespaces in a container: no idmapped mount)
#   rootfs/usr/local/bin/git             the host's, for the sessions' checkpoint stores
#   rootfs/lib*/...                      their interpreter and shared libraries, if dynamic
#   rootfs/etc/ssl/certs/ca-certificates.crt   the host's CA bundle (the model endpoint)
#   rootfs/etc/{passwd,group}            root, cordon (10001) and nobody
#   rootfs/tmp, rootfs/var/lib/cordon    mount points
# Sandboxes are sibling containers the server asks the host's dockerd for; only this
# container mounts the Docker socket (deploy/compose.yaml).
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin CORDON_HOME=/var/lib/cordon SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 10001:10001
EXPOSE 8420
ENTRYPOINT ["/usr/local/bin/cordon"]
CMD ["serve", "--listen", "0.0.0.0:8420", "--data", "/var/lib/cordon", "--workspace-root", "/srv/cordon/workspaces"]
