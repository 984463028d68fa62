"""The staged pipeline's stages, one module per stage; `registry` lists them in order."""
