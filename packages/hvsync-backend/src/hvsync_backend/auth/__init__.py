"""API keys: hashing, the verification cache, per-IP lockout and the FastAPI dependency that enforces them."""
