"""What the backend does for a caller, below HTTP: set up and run syncs, check and repair NetBox's setup.

The routes (`api/`) map HTTP to these calls and back; the modules here hold the app context
(`context.BackendContext`) and hand the sync engine (`sync/`) only what a run needs, so `sync/` never
imports the context.
"""
