"""Real mode: the emulator as a validating proxy in front of a real Proxmox VE (see docs/emulator-real-mode.md)."""
