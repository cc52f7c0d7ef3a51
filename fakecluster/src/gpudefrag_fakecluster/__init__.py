"""The test harness of gpudefrag's Kubernetes driver, kept out of the product package: a fake API
server, a KWOK-like kubelet, a Job-like workload controller and an auditor, on 127.0.0.1, with
the real paths, status codes and watch semantics for the subset the driver uses.  The tests,
``gpudefrag k8s-demo`` and ``gpudefrag k8s-bench`` run against it
(``pip install -e ./fakecluster``)."""
