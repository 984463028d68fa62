"""Mock mode: an in-memory Proxmox VE cluster (state model + hand-modelled and generic behaviour)."""
