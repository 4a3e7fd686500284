"""gslbd: a global server load balancer that answers DNS with healthy, nearby endpoints."""

__version__ = "0.1.0"
