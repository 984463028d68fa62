"""Sync engine: stages that read Proxmox and reconcile NetBox."""
