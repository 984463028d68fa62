"""Proxmox VE API emulator: every operation of the compiled API schema, served from an in-memory cluster."""

__version__ = "0.1.0"
