"""Rules of the SPEC that need no Django: push, preflight, adoption, redaction, classification.

One module per rule family (see docs/plugin-rules.md for the map from SPEC rule to function and test).
Nothing here imports Django, NetBox or an HTTP library: HTTP goes through `transport.Transport`, which the
NetBox glue implements with `requests`.
"""
