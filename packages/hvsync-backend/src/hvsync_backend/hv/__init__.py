"""The backend's own async Proxmox VE API client."""
