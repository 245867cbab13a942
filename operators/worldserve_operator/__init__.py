"""The worldserve Kubernetes operator (kopf): WorldModel and Tenant custom resources.

Layers import only downward: ``specs`` and ``builders`` are pure data; ``registry`` and
``kube`` talk to Redis and the Kubernetes API; ``handlers`` wires them to kopf; ``main`` runs it.
"""
