"""``windowfit proxy``: an HTTP proxy that fits every request on its way to the provider."""
