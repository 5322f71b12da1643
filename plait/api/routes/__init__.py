"""The API's routers, one module per resource; :func:`plait.api.create_app` mounts them."""
