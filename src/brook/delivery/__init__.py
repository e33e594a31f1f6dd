"""Delivery of records to HTTP endpoints (webhooks), SPEC §7 and docs/DELIVERY.md.

Each (endpoint, topic) pair is a queue group consumed by the broker's own
workers; what is new here is the endpoints' settings and storage, the
scheduler that keeps every endpoint isolated from the others (in-flight budget,
rate limit, circuit breaker), the HTTP workers, and the pure rules they follow:
signing (signing.py), what an HTTP outcome means (outcome.py), which addresses
may be called (addresses.py).
"""
