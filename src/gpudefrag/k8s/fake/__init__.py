"""A fake Kubernetes API server, kubelet and workload controller (for the tests and
``gpudefrag k8s-demo``): the real paths, status codes and watch semantics for the subset the
driver uses, on 127.0.0.1."""
