"""The Kubernetes driver: a scheduler, a defragmentation controller and a what-if planner that
run the decision core (:mod:`gpudefrag.model.port`) against a real API server through
lightkube.  Nothing in the core imports this package."""
