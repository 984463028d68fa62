"""The plugin's REST serializers by model family, as NetBox's own apps keep them (`api/serializers_/`).

`api/serializers.py` re-exports every serializer: NetBox finds a model's serializer there by name.
"""
