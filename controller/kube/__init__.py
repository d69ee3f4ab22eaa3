"""The Kubernetes edge every process shares: the API client and its retries, informers,
the work queue, leader election, health endpoints, fatal errors and the process's life
(logging, signals, exit codes).

It knows nothing of admission: the controller's runtime, the integrations, the cost
controller, the bench and the kubectl plugin build on it, never on each other's
internals.
"""
