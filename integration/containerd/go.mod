module devlet.dev/integration/containerd

go 1.24.0
