"""HTTP routers. ``hvsync_backend.app.ROUTERS`` lists the ones the app includes."""
