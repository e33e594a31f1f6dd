"""The HTTP server: a thin shell over the broker (routing, limits, encoding; no business logic)."""
