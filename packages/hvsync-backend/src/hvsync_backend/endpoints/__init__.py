"""Endpoint registry: the NetBox singleton and the Proxmox endpoints, with credentials encrypted at rest."""
